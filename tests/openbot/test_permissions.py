"""The permission matrix of the host routes [H1–H6, C1–C5, A7, §8].

Every route × {alice (org admin, chat owner), bob (member), carol (channel member),
dave (another organization), no token, bad token}. Another organization's org, bot or
chat is a 404 — the same 404 as an id that does not exist — never a 403.
"""

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from chats import services as chat_services
from chats.models import Chat
from openbot import services
from openbot.models import Membership
from tests.conftest import World
from tests.factories import ActorFactory

ACTORS = ["alice", "bob", "carol", "dave", "no_token", "bad_token"]


@dataclass
class Scene:
    world: World
    private_chat: Chat  # alice's own chat with the bot
    group_chat: Chat  # alice's chat in the channel she shares with carol
    dave_chat: Chat  # dave's chat with his own bot, in the other organization

    def client(self, actor: str) -> APIClient:
        if actor == "no_token":
            return APIClient()
        if actor == "bad_token":
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-real-token")
            return client
        return self.world.actor(actor).client()


@pytest.fixture
def scene(world: World) -> Scene:
    private_chat = chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=None, test=False
    )
    group_chat = chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=world.channel.id, test=False
    )
    dave_chat = chat_services.chat_create(
        caller=world.dave.caller, bot_id=world.other_bot.id, channel_id=None, test=False
    )
    for chat in (private_chat, group_chat, dave_chat):
        turn = chat_services.turn_start(chat=chat, person=chat.owner, text="hello")
        chat_services.item_append(chat=chat, kind="bot", text="hi", turn=turn)
        chat_services.turn_end(turn=turn)
    return Scene(world, private_chat, group_chat, dave_chat)


def call(client: APIClient, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, body, format="json")


def assert_error(response: Any, status: int, code: str | None = None) -> None:
    """§8: every error is `{"error": {"code", "message"[, "fields"]}}`."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body


# (route, expected status per actor). 401 for no/bad token comes before anything else.
UNAUTHENTICATED = {"no_token": 401, "bad_token": 401}
MATRIX: list[tuple[str, dict[str, int]]] = [
    # [A7] org settings: org admins only; another organization's org is a 404.
    ("get_settings", {"alice": 200, "bob": 403, "carol": 403, "dave": 404}),
    ("patch_settings", {"alice": 200, "bob": 403, "carol": 403, "dave": 404}),
    # [C4, H3] anyone with read on the bot creates a chat; dave cannot see the bot.
    ("create_chat", {"alice": 201, "bob": 201, "carol": 201, "dave": 404}),
    # [C4] a group chat needs the caller in the channel.
    ("create_group_chat", {"alice": 201, "bob": 404, "carol": 201, "dave": 404}),
    # [C4] participants only: the owner; channel members in a group chat.
    ("get_private_chat", {"alice": 200, "bob": 404, "carol": 404, "dave": 404}),
    ("get_group_chat", {"alice": 200, "bob": 404, "carol": 200, "dave": 404}),
    ("get_private_items", {"alice": 200, "bob": 404, "carol": 404, "dave": 404}),
    ("get_group_items", {"alice": 200, "bob": 404, "carol": 200, "dave": 404}),
    # [C4] deleting the history is the owner's alone: a participant gets 403.
    ("delete_private_items", {"alice": 204, "bob": 404, "carol": 404, "dave": 404}),
    ("delete_group_items", {"alice": 204, "bob": 404, "carol": 403, "dave": 404}),
    # [C4] participants may take turns.
    ("take_private_turn", {"alice": 201, "bob": 404, "carol": 404, "dave": 404}),
    ("take_group_turn", {"alice": 201, "bob": 404, "carol": 201, "dave": 404}),
]


def request_for(scene: Scene, route: str) -> tuple[str, str, dict[str, Any] | None]:
    world = scene.world
    settings_url = f"/v1/organizations/{world.org.id}/settings"
    turn = {"text": "what is on today?"}
    return {
        "get_settings": ("get", settings_url, None),
        "patch_settings": ("patch", settings_url, {"botMemory": False}),
        "create_chat": ("post", "/v1/chats", {"bot": world.bot.id}),
        "create_group_chat": (
            "post",
            "/v1/chats",
            {"bot": world.bot.id, "channel": world.channel.id},
        ),
        "get_private_chat": ("get", f"/v1/chats/{scene.private_chat.id}", None),
        "get_group_chat": ("get", f"/v1/chats/{scene.group_chat.id}", None),
        "get_private_items": ("get", f"/v1/chats/{scene.private_chat.id}/items", None),
        "get_group_items": ("get", f"/v1/chats/{scene.group_chat.id}/items", None),
        "delete_private_items": ("delete", f"/v1/chats/{scene.private_chat.id}/items", None),
        "delete_group_items": ("delete", f"/v1/chats/{scene.group_chat.id}/items", None),
        "take_private_turn": ("post", f"/v1/chats/{scene.private_chat.id}/turns", turn),
        "take_group_turn": ("post", f"/v1/chats/{scene.group_chat.id}/turns", turn),
    }[route]


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize(("route", "expected"), MATRIX, ids=[route for route, _ in MATRIX])
def test_permission_matrix(scene: Scene, route: str, expected: dict[str, int], actor: str) -> None:
    method, url, body = request_for(scene, route)
    status = {**expected, **UNAUTHENTICATED}[actor]
    response = call(scene.client(actor), method, url, body)
    if status >= 400:
        codes = {401: "unauthenticated", 403: "forbidden", 404: "not_found"}
        assert_error(response, status, codes[status])
    else:
        assert response.status_code == status, response.content


def test_unauthenticated_is_401_with_bearer_challenge(scene: Scene) -> None:
    """[H2, §8] 401 carries `WWW-Authenticate: Bearer` and the error shape."""
    response = scene.client("no_token").get(f"/v1/chats/{scene.private_chat.id}")
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer obt_not-a-real-token",
        "Bearer",
        "Bearer two words",
        "bearer obt_not-a-real-token",
        "Basic YWxpY2U6c2VjcmV0",
        "Token abc",
        "",
    ],
)
def test_bad_authorization_headers_are_401(scene: Scene, header: str) -> None:
    """[H2] Anything but a valid `Bearer <token>` is a 401, never a 403 or 500."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    for url in (
        f"/v1/organizations/{scene.world.org.id}/settings",
        f"/v1/chats/{scene.private_chat.id}",
    ):
        assert_error(client.get(url), 401, "unauthenticated")


def test_valid_token_with_garbage_appended_is_401(scene: Scene) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {scene.world.alice.token}x")
    assert_error(client.get(f"/v1/chats/{scene.private_chat.id}"), 401)


def test_401_comes_before_body_validation_and_lookup(scene: Scene) -> None:
    """No token: 401 even for a bad body or an unknown id — nothing is revealed first."""
    anon = APIClient()
    assert_error(anon.post("/v1/chats", "{", content_type="application/json"), 401)
    assert_error(anon.get("/v1/chats/chat_does_not_exist"), 401)
    assert_error(anon.patch("/v1/organizations/o_nope/settings", {"x": 1}, format="json"), 401)


def test_forbidden_writes_change_nothing(scene: Scene) -> None:
    """403/404 answers leave the settings and the chat history as they were."""
    world = scene.world
    url = f"/v1/organizations/{world.org.id}/settings"
    world.bob.client().patch(url, {"botMemory": False}, format="json")
    world.dave.client().patch(url, {"botMemory": False}, format="json")
    world.org.refresh_from_db()
    assert world.org.bot_memory is True

    items_url = f"/v1/chats/{scene.group_chat.id}/items"
    assert world.carol.client().delete(items_url).status_code == 403
    assert world.dave.client().delete(items_url).status_code == 404
    assert world.bob.client().delete(items_url).status_code == 404
    assert len(world.alice.client().get(items_url).json()["items"]) == 2


def test_owner_delete_removes_the_history(scene: Scene) -> None:
    """[C4] The owner's DELETE empties the chat; the chat itself stays."""
    client = scene.world.alice.client()
    url = f"/v1/chats/{scene.private_chat.id}/items"
    assert client.delete(url).status_code == 204
    assert client.get(url).json() == {"items": []}
    assert client.get(f"/v1/chats/{scene.private_chat.id}").status_code == 200


def test_outsider_cannot_reach_anything_by_guessing_ids(scene: Scene) -> None:
    """[§8] dave tries every id of org A on every route: each is a 404 like a made-up id."""
    world = scene.world
    dave = world.dave.client()
    for org_id in (world.org.id, "o_00000000000000000000"):
        for method in ("get", "patch"):
            response = call(dave, method, f"/v1/organizations/{org_id}/settings", {})
            assert_error(response, 404, "not_found")
            assert response.json()["error"]["message"] == f"organization {org_id} not found"
    for bot_id in (world.bot.id, "bot_00000000000000000000"):
        response = dave.post("/v1/chats", {"bot": bot_id}, format="json")
        assert_error(response, 404, "not_found")
        assert response.json()["error"]["message"] == f"bot {bot_id} not found"
    # dave's own bot with org A's channel: the channel is invisible to him.
    response = dave.post(
        "/v1/chats", {"bot": world.other_bot.id, "channel": world.channel.id}, format="json"
    )
    assert_error(response, 404, "not_found")
    for chat_id in (scene.private_chat.id, scene.group_chat.id, "chat_00000000000000000000"):
        for method, suffix, body in (
            ("get", "", None),
            ("get", "/items", None),
            ("delete", "/items", None),
            ("post", "/turns", {"text": "hi"}),
        ):
            response = call(dave, method, f"/v1/chats/{chat_id}{suffix}", body)
            assert_error(response, 404, "not_found")
            assert response.json()["error"]["message"] == f"chat {chat_id} not found"
    # …and the other way round: alice cannot reach dave's organization either.
    alice = world.alice.client()
    assert_error(alice.get(f"/v1/organizations/{world.other_org.id}/settings"), 404)
    assert_error(alice.post("/v1/chats", {"bot": world.other_bot.id}, format="json"), 404)
    assert_error(alice.get(f"/v1/chats/{scene.dave_chat.id}"), 404)
    assert_error(alice.get(f"/v1/chats/{scene.dave_chat.id}/items"), 404)
    assert_error(alice.delete(f"/v1/chats/{scene.dave_chat.id}/items"), 404)


def test_outsiders_own_objects_work_for_him(scene: Scene) -> None:
    """The 404s above are about organizations, not about dave: his own org and chat work."""
    dave = scene.world.dave.client()
    assert dave.get(f"/v1/organizations/{scene.world.other_org.id}/settings").status_code == 200
    assert dave.get(f"/v1/chats/{scene.dave_chat.id}/items").status_code == 200


def test_bot_without_a_grant_is_a_404(world: World) -> None:
    """[H3] A bot of your own organization with no grant for you is invisible: 404."""
    private_bot = services.bot_create(organization=world.org, name="alice only")
    services.grant_set(bot=private_bot, level="read", person=world.alice.person)
    body = {"bot": private_bot.id}
    assert world.alice.client().post("/v1/chats", body, format="json").status_code == 201
    assert_error(world.bob.client().post("/v1/chats", body, format="json"), 404)


def test_linked_bot_is_usable_from_the_other_organization(scene: Scene) -> None:
    """[H4, C1] A bot shared into org B works there through its linked bot; the source bot's
    id stays a 404 in org B, and the linked bot's id is a 404 in org A."""
    world = scene.world
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    services.grant_set(bot=linked, level="read", organization=world.other_org)
    dave = world.dave.client()

    response = dave.post("/v1/chats", {"bot": linked.id}, format="json")
    assert response.status_code == 201, response.content
    chat = response.json()
    assert chat["bot"] == linked.id
    assert chat["organization"] == world.other_org.id
    assert dave.get(f"/v1/chats/{chat['id']}").status_code == 200

    assert_error(dave.post("/v1/chats", {"bot": world.bot.id}, format="json"), 404)
    assert_error(world.alice.client().post("/v1/chats", {"bot": linked.id}, format="json"), 404)
    assert_error(world.alice.client().get(f"/v1/chats/{chat['id']}"), 404)


def test_linked_bot_needs_a_grant_in_the_other_organization(world: World) -> None:
    """[H3, H4] Linking shares the bot; who in org B may use it is still up to grants."""
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    assert_error(world.dave.client().post("/v1/chats", {"bot": linked.id}, format="json"), 404)


def test_token_of_a_removed_member_is_401(scene: Scene) -> None:
    """[H2] A token works only while its person is a member of its organization."""
    world = scene.world
    carol = world.carol.client()
    assert carol.get(f"/v1/chats/{scene.group_chat.id}").status_code == 200
    services.membership_remove(organization=world.org, person=world.carol.person)
    assert_error(carol.get(f"/v1/chats/{scene.group_chat.id}"), 401, "unauthenticated")
    assert_error(carol.post("/v1/chats", {"bot": world.bot.id}, format="json"), 401)
    # Coming back does not revive the old token: a new one is issued.
    services.membership_add(organization=world.org, person=world.carol.person)
    assert_error(carol.get(f"/v1/chats/{scene.group_chat.id}"), 401)


def test_token_stops_working_the_moment_membership_ends(scene: Scene) -> None:
    """[H2] Authentication checks membership on every request, not only when the token was
    issued: with the membership row gone by any path (here deleted directly), the token
    that still exists is a 401."""
    world = scene.world
    Membership.objects.filter(organization=world.org, person=world.bob.person).delete()
    assert_error(world.bob.client().post("/v1/chats", {"bot": world.bot.id}, format="json"), 401)


def test_channel_membership_is_checked_at_each_read(scene: Scene) -> None:
    """[H5] Leaving the channel ends carol's access to its group chat at once."""
    world = scene.world
    carol = world.carol.client()
    url = f"/v1/chats/{scene.group_chat.id}/items"
    assert carol.get(url).status_code == 200
    services.channel_member_remove(channel=world.channel, person=world.carol.person)
    assert_error(carol.get(url), 404)
    assert_error(carol.get(f"/v1/chats/{scene.group_chat.id}"), 404)
    body = {"bot": world.bot.id, "channel": world.channel.id}
    assert_error(carol.post("/v1/chats", body, format="json"), 404)


def test_token_is_bound_to_its_organization(world: World) -> None:
    """[H2] A person in two organizations acts in the token's organization only: erin is
    admin of org A, but with her org B token org A's settings, bot and chats are 404."""
    erin_a = ActorFactory.create(organization=world.org, name="erin", admin=True)
    services.membership_add(organization=world.other_org, person=erin_a.person)
    token_b = services.token_create(person=erin_a.person, organization=world.other_org)
    erin_b = APIClient()
    erin_b.credentials(HTTP_AUTHORIZATION=f"Bearer {token_b}")

    chat = chat_services.chat_create(
        caller=erin_a.caller, bot_id=world.bot.id, channel_id=None, test=False
    )
    assert erin_a.client().get(f"/v1/organizations/{world.org.id}/settings").status_code == 200
    assert_error(erin_b.get(f"/v1/organizations/{world.org.id}/settings"), 404)
    assert_error(erin_b.post("/v1/chats", {"bot": world.bot.id}, format="json"), 404)
    assert_error(erin_b.get(f"/v1/chats/{chat.id}"), 404)
    # A member, not an admin, of org B: its settings are a 403.
    assert_error(erin_b.get(f"/v1/organizations/{world.other_org.id}/settings"), 403)


def test_admin_role_is_not_bot_access(world: World) -> None:
    """[H3, X4] Being org admin gives no bot: only grants do."""
    admin = ActorFactory.create(organization=world.org, name="otto", admin=True)
    private_bot = services.bot_create(organization=world.org, name="no grants")
    assert_error(admin.client().post("/v1/chats", {"bot": private_bot.id}, format="json"), 404)


def test_unknown_method_is_405_in_the_error_shape(scene: Scene) -> None:
    client = scene.world.alice.client()
    assert_error(client.put(f"/v1/chats/{scene.private_chat.id}", {}, format="json"), 405)
    assert_error(client.delete(f"/v1/organizations/{scene.world.org.id}/settings"), 405)
    assert_error(client.get("/v1/chats"), 405)
    assert_error(client.get(f"/v1/chats/{scene.private_chat.id}/turns"), 405)
