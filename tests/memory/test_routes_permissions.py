"""Who may use the memory routes [H3, H4, §8, X4].

alice has write on the bot, bob and carol read (through the organization), dave is an
outsider in another organization. Another organization's bot, or a bot without a grant, is a
404; read-only on purge or settings is a 403; no or a bad token is a 401.
"""

from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Change, Entry, Pool
from openbot import services
from openbot.models import Membership
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact

# (method, path under /v1/bots/:botId/memory, body, the status of a successful call)
ROUTES = [
    ("get", "", None, 200),
    ("post", "", {"command": {"_tag": "Remember", "content": "note", "tags": ["x"]}}, 201),
    # [D2] As Forget: read on the bot is enough.
    ("post", "", {"command": {"_tag": "ForgetMine"}}, 200),
    ("get", "/log", None, 200),
    ("post", "/purge", {"tag": "from:u_nobody"}, 200),
    ("get", "/bot", None, 200),
    ("patch", "/bot", {"expected": 0, "concurrency": 3}, 200),
]
WRITER_ONLY = {"/purge", "/bot"}


def route_id(method: str, path: str, body: Any) -> str:
    """`post memory Remember`: the command's tag tells the commands of one route apart."""
    tag = body["command"]["_tag"] if isinstance(body, dict) and "command" in body else ""
    return f"{method} memory{path} {tag}".rstrip()


ROUTE_IDS = [route_id(method, path, body) for method, path, body, _ in ROUTES]


def call(client: APIClient, method: str, bot_id: str, path: str, body: Any) -> Any:
    url = f"/v1/bots/{bot_id}/memory{path}"
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, body, format="json")


def client_of(world: World, who: str) -> APIClient:
    if who == "anonymous":
        return APIClient()
    if who == "bad token":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-token")
        return client
    return world.actor(who).client()


def expected_status(who: str, path: str, ok: int) -> int:
    if who in ("anonymous", "bad token"):
        return 401
    if who == "dave":
        return 404
    if who in ("bob", "carol") and path in WRITER_ONLY:
        return 403
    return ok


@pytest.mark.parametrize("who", ["alice", "bob", "carol", "dave", "anonymous", "bad token"])
@pytest.mark.parametrize(("method", "path", "body", "ok"), ROUTES, ids=ROUTE_IDS)
def test_permission_matrix(
    world: World, who: str, method: str, path: str, body: Any, ok: int
) -> None:
    response = call(client_of(world, who), method, world.bot.id, path, body)

    status = expected_status(who, path, ok)
    assert response.status_code == status, response.json()
    if status >= 400:
        assert set(response.json()) == {"error"}
        # A refused call changes nothing.
        assert not Entry.objects.exists()
        assert not Change.objects.exists()
        assert not Pool.objects.filter(settings_version__gt=0).exists()
    if status == 401:
        assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path", "body", "ok"), ROUTES, ids=ROUTE_IDS)
def test_dave_uses_his_own_bot_and_alice_may_not(
    world: World, method: str, path: str, body: Any, ok: int
) -> None:
    assert call(world.dave.client(), method, world.other_bot.id, path, body).status_code == ok
    assert call(world.alice.client(), method, world.other_bot.id, path, body).status_code == 404


@pytest.mark.parametrize(("method", "path", "body", "ok"), ROUTES, ids=ROUTE_IDS)
def test_a_bot_without_a_grant_is_not_found(
    world: World, method: str, path: str, body: Any, ok: int
) -> None:
    """Org admin rights give no access to a bot: alice has no grant on this one [X4]."""
    ungranted = services.bot_create(organization=world.org, name="ungranted")
    assert call(world.alice.client(), method, ungranted.id, path, body).status_code == 404
    assert call(world.alice.client(), method, "bot_unknown", path, body).status_code == 404


def test_a_person_grant_of_read_is_read_only(world: World) -> None:
    solo = services.bot_create(organization=world.org, name="solo")
    services.grant_set(bot=solo, level="read", person=world.bob.person)

    assert call(world.bob.client(), "get", solo.id, "", None).status_code == 200
    assert call(world.bob.client(), "get", solo.id, "/bot", None).status_code == 403
    assert call(world.carol.client(), "get", solo.id, "", None).status_code == 404


def test_a_token_of_a_person_who_left_is_refused(world: World) -> None:
    Membership.objects.filter(person=world.bob.person, organization=world.org).delete()

    assert call(world.bob.client(), "get", world.bot.id, "", None).status_code == 401


def test_write_never_widens_anyones_view(world: World) -> None:
    """[X4] alice has write and is org admin, yet sees neither bob's pinned nor private fact."""
    bobs_pin = world.bob.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "my secret"}},
        format="json",
    )
    bobs_fact = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.bob, bot=world.bot), person=world.bob.person
            )
        ],
        topics=["secret"],
    )
    alice = world.alice.client()

    assert alice.get(f"/v1/bots/{world.bot.id}/memory").json()["entries"] == []
    assert alice.get(f"/v1/bots/{world.bot.id}/memory?tags=secret").json()["entries"] == []
    assert alice.get(f"/v1/bots/{world.bot.id}/memory/log").json()["changes"] == []
    for entry_id in [bobs_pin.json()["id"], bobs_fact.id]:
        forget = alice.post(
            f"/v1/bots/{world.bot.id}/memory",
            {"command": {"_tag": "Forget", "id": entry_id}},
            format="json",
        )
        assert forget.status_code == 409
    seen = world.bob.client().get(f"/v1/bots/{world.bot.id}/memory").json()["entries"]
    assert {entry["id"] for entry in seen} == {bobs_pin.json()["id"], bobs_fact.id}
