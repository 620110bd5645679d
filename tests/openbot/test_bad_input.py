"""Bad input is a 4xx naming the field, never a 500 [§8: "400 (bad input, every field named)
… never 500 on bad input"]. Routes with a body: POST /v1/chats [C4] and
PATCH /v1/organizations/:orgId/settings [A7]."""

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from tests.conftest import World

BOT = "<bot>"  # replaced by the world's bot id
NOT_AN_OBJECT = ["[]", '["bot"]', "5", '"bot"', "true", "null"]
MALFORMED = ['{"bot": ', "{'bot': 'x'}", "{bot: 1}", '{"bot": NaN}', "\xff\xfe", "{}}", "[" * 3]


def error(response: Any) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.content)
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


def assert_names(response: Any, *names: str, status: int = 400) -> None:
    """Each field is named in `error.fields` (or, for the body itself, in the message)."""
    assert response.status_code == status, (response.status_code, response.content)
    err = error(response)
    for name in names:
        assert name in (err.get("fields") or {}) or err["message"].startswith(f"{name}:"), err


def with_bot(world: World, body: dict[str, Any]) -> dict[str, Any]:
    return {key: world.bot.id if value == BOT else value for key, value in body.items()}


# --- POST /v1/chats {bot, channel?, test?} [C4] -------------------------------------------

CHAT_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({}, ["bot"]),
    ({"bot": 5}, ["bot"]),
    ({"bot": 5.5}, ["bot"]),
    ({"bot": True}, ["bot"]),
    ({"bot": None}, ["bot"]),
    ({"bot": [BOT]}, ["bot"]),
    ({"bot": {"id": "bot_x"}}, ["bot"]),
    ({"bot": ""}, ["bot"]),
    ({"bot": "b" * 41}, ["bot"]),
    ({"bot": "bot_\x00"}, ["bot"]),
    ({"bot": BOT, "channel": 5}, ["channel"]),
    ({"bot": BOT, "channel": ["ch_x"]}, ["channel"]),
    ({"bot": BOT, "channel": False}, ["channel"]),
    ({"bot": BOT, "test": "yes"}, ["test"]),
    ({"bot": BOT, "test": "true"}, ["test"]),
    ({"bot": BOT, "test": "false"}, ["test"]),
    ({"bot": BOT, "test": 1}, ["test"]),
    ({"bot": BOT, "test": 0}, ["test"]),
    ({"bot": BOT, "test": None}, ["test"]),
    ({"bot": BOT, "test": []}, ["test"]),
    ({"bot": BOT, "owner": "u_x"}, ["owner"]),
    ({"bot": BOT, "Bot": BOT}, ["Bot"]),
    # Every fault at once is named at once.
    ({"bot": 5, "test": "yes", "extra": 1}, ["bot", "test", "extra"]),
    ({"channel": 5, "extra": 1}, ["bot", "channel", "extra"]),
]


@pytest.mark.parametrize(("body", "names"), CHAT_CASES, ids=[repr(b) for b, _ in CHAT_CASES])
def test_chat_create_names_the_bad_field(
    world: World, body: dict[str, Any], names: list[str]
) -> None:
    response = world.alice.client().post("/v1/chats", with_bot(world, body), format="json")
    assert_names(response, *names)


@pytest.mark.parametrize("raw", NOT_AN_OBJECT)
def test_chat_create_refuses_a_body_that_is_not_an_object(world: World, raw: str) -> None:
    client = world.alice.client()
    response = client.post("/v1/chats", raw, content_type="application/json")
    assert_names(response, "body")


@pytest.mark.parametrize("raw", MALFORMED)
def test_chat_create_refuses_malformed_json(world: World, raw: str) -> None:
    response = world.alice.client().post(
        "/v1/chats", raw.encode("latin-1"), content_type="application/json"
    )
    assert_names(response, "body")


def test_chat_create_refuses_an_empty_body_naming_bot(world: World) -> None:
    response = world.alice.client().post("/v1/chats", "", content_type="application/json")
    assert_names(response, "bot")


def test_chat_create_refuses_json_nested_too_deeply(world: World) -> None:
    """Python's JSON decoder raises RecursionError here; that must not be a 500."""
    raw = "[" * 200_000 + "]" * 200_000
    response = world.alice.client().post("/v1/chats", raw, content_type="application/json")
    assert_names(response, "body")


def test_chat_create_refuses_an_oversized_body(world: World) -> None:
    raw = json.dumps({"bot": world.bot.id, "pad": "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE})
    response = world.alice.client().post("/v1/chats", raw, content_type="application/json")
    assert_names(response, "body", status=413)


def test_body_limit_is_the_setting(world: World) -> None:
    """The parser reads at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes, whatever the stream."""
    raw = json.dumps({"bot": world.bot.id, "test": True})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(raw) - 1):
        response = world.alice.client().post("/v1/chats", raw, content_type="application/json")
        assert_names(response, "body", status=413)
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(raw)):
        response = world.alice.client().post("/v1/chats", raw, content_type="application/json")
        assert response.status_code == 201, response.content


def test_chat_create_refuses_a_form_body(world: World) -> None:
    response = world.alice.client().post("/v1/chats", {"bot": world.bot.id})  # multipart
    assert response.status_code == 415
    assert error(response)["message"].startswith("body:")


@pytest.mark.parametrize("bot_id", ["bot_00000000000000000000", "nope", "o_x", "../x"])
def test_chat_create_with_unknown_bot_is_404(world: World, bot_id: str) -> None:
    response = world.alice.client().post("/v1/chats", {"bot": bot_id}, format="json")
    assert response.status_code == 404
    assert error(response)["code"] == "not_found"


def test_chat_create_with_unknown_channel_is_404(world: World) -> None:
    body = {"bot": world.bot.id, "channel": "ch_00000000000000000000"}
    response = world.alice.client().post("/v1/chats", body, format="json")
    assert response.status_code == 404
    assert error(response)["message"] == "channel ch_00000000000000000000 not found"


def test_chat_create_accepts_the_valid_forms(world: World) -> None:
    """The strict fields still take what §3 allows: a null channel, true/false for test."""
    client = world.alice.client()
    for body in (
        {"bot": world.bot.id},
        {"bot": world.bot.id, "channel": None},
        {"bot": world.bot.id, "test": True},
        {"bot": world.bot.id, "test": False, "channel": world.channel.id},
    ):
        response = client.post("/v1/chats", body, format="json")
        assert response.status_code == 201, (body, response.content)
        assert response.json()["test"] is body.get("test", False)


# --- PATCH /v1/organizations/:orgId/settings {botMemory?, botMemoryModel?} [A7] ------------

SETTINGS_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"botMemory": "false"}, ["botMemory"]),
    ({"botMemory": "yes"}, ["botMemory"]),
    ({"botMemory": 0}, ["botMemory"]),
    ({"botMemory": 1}, ["botMemory"]),
    ({"botMemory": None}, ["botMemory"]),
    ({"botMemory": [True]}, ["botMemory"]),
    ({"botMemory": {}}, ["botMemory"]),
    ({"botMemoryModel": 5}, ["botMemoryModel"]),
    ({"botMemoryModel": True}, ["botMemoryModel"]),
    ({"botMemoryModel": ["openai:gpt"]}, ["botMemoryModel"]),
    ({"botMemoryModel": {"name": "x"}}, ["botMemoryModel"]),
    ({"botMemoryModel": ""}, ["botMemoryModel"]),
    ({"botMemoryModel": "m" * 201}, ["botMemoryModel"]),
    ({"botMemoryModel": "a\x00b"}, ["botMemoryModel"]),
    ({"bot_memory": False}, ["bot_memory"]),
    ({"botmemory": False}, ["botmemory"]),
    ({"botMemory": "no", "botMemoryModel": 7, "x": 1}, ["botMemory", "botMemoryModel", "x"]),
]


@pytest.mark.parametrize(
    ("body", "names"), SETTINGS_CASES, ids=[repr(b) for b, _ in SETTINGS_CASES]
)
def test_settings_patch_names_the_bad_field_and_changes_nothing(
    world: World, body: dict[str, Any], names: list[str]
) -> None:
    url = f"/v1/organizations/{world.org.id}/settings"
    response = world.alice.client().patch(url, body, format="json")
    assert_names(response, *names)
    world.org.refresh_from_db()
    assert (world.org.bot_memory, world.org.bot_memory_model) == (True, None)


@pytest.mark.parametrize("raw", NOT_AN_OBJECT + MALFORMED)
def test_settings_patch_refuses_non_object_and_malformed_bodies(world: World, raw: str) -> None:
    url = f"/v1/organizations/{world.org.id}/settings"
    response = world.alice.client().patch(
        url, raw.encode("latin-1"), content_type="application/json"
    )
    assert_names(response, "body")


@pytest.mark.parametrize("model", ["junk", "gpt-4", "anthropic:claude", "openai:", " : "])
def test_settings_patch_refuses_a_model_no_provider_runs(world: World, model: str) -> None:
    """[A15] A model is "<provider>:<model>" with a known provider; nothing is changed."""
    url = f"/v1/organizations/{world.org.id}/settings"
    response = world.alice.client().patch(url, {"botMemoryModel": model}, format="json")
    assert_names(response, "botMemoryModel")
    world.org.refresh_from_db()
    assert world.org.bot_memory_model is None


def test_settings_patch_refuses_an_oversized_body(world: World) -> None:
    url = f"/v1/organizations/{world.org.id}/settings"
    raw = json.dumps({"botMemoryModel": "m" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    response = world.alice.client().patch(url, raw, content_type="application/json")
    assert_names(response, "body", status=413)


def test_settings_patch_accepts_the_valid_forms(world: World) -> None:
    """[H1] botMemoryModel is a string or null; an empty PATCH changes nothing."""
    client = world.alice.client()
    url = f"/v1/organizations/{world.org.id}/settings"
    assert client.patch(url, {}, format="json").json() == {
        "botMemory": True,
        "botMemoryModel": None,
    }
    response = client.patch(url, {"botMemory": False, "botMemoryModel": "openai:m1"}, format="json")
    assert response.json() == {"botMemory": False, "botMemoryModel": "openai:m1"}
    response = client.patch(url, {"botMemoryModel": None}, format="json")
    assert response.json() == {"botMemory": False, "botMemoryModel": None}


def test_settings_of_unknown_org_is_404(world: World) -> None:
    response = world.alice.client().patch(
        "/v1/organizations/o_00000000000000000000/settings", {"botMemory": 5}, format="json"
    )
    assert response.status_code == 404


# --- POST /v1/chats/:chatId/turns {text} [C4] --------------------------------------------

TURN_CASES: list[tuple[Any, list[str]]] = [
    ({}, ["text"]),
    ({"text": 5}, ["text"]),
    ({"text": True}, ["text"]),
    ({"text": None}, ["text"]),
    ({"text": ["hello"]}, ["text"]),
    ({"text": {"value": "hello"}}, ["text"]),
    ({"text": ""}, ["text"]),
    ({"text": "a\x00b"}, ["text"]),
    ({"text": "x" * 32_001}, ["text"]),
    ({"text": "hello", "person": "u_x"}, ["person"]),
    ({"text": 5, "author": "bot"}, ["text", "author"]),
]


@pytest.fixture
def chat_url(world: World) -> str:
    response = world.alice.client().post("/v1/chats", {"bot": world.bot.id}, format="json")
    return f"/v1/chats/{response.json()['id']}/turns"


@pytest.mark.parametrize(("body", "names"), TURN_CASES, ids=[repr(b)[:40] for b, _ in TURN_CASES])
def test_turn_names_the_bad_field_and_stores_nothing(
    world: World, chat_url: str, body: dict[str, Any], names: list[str]
) -> None:
    client = world.alice.client()
    assert_names(client.post(chat_url, body, format="json"), *names)
    items_url = chat_url.removesuffix("/turns") + "/items"
    assert client.get(items_url).json() == {"items": []}


@pytest.mark.parametrize("raw", NOT_AN_OBJECT + MALFORMED)
def test_turn_refuses_non_object_and_malformed_bodies(
    world: World, chat_url: str, raw: str
) -> None:
    response = world.alice.client().post(
        chat_url, raw.encode("latin-1"), content_type="application/json"
    )
    assert_names(response, "body")


def test_turn_refuses_an_oversized_body(world: World, chat_url: str) -> None:
    raw = json.dumps({"text": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    response = world.alice.client().post(chat_url, raw, content_type="application/json")
    assert_names(response, "body", status=413)


def test_turn_in_an_unknown_chat_is_404(world: World) -> None:
    response = world.alice.client().post(
        "/v1/chats/chat_00000000000000000000/turns", {"text": 5}, format="json"
    )
    assert response.status_code == 404


# --- lone surrogates: JSON may hold "\ud800", UTF-8 cannot ------------------------------------


@pytest.mark.parametrize(
    ("method", "route", "body"),
    [
        ("post", "chats", {"bot": BOT, "\ud800": 1}),
        ("post", "chats", {"bot": BOT, "channel": "ch_\ud800"}),
        ("patch", "settings", {"botMemory": True, "\ud800": 1}),
        ("patch", "settings", {"botMemoryModel": "\ud800"}),
        ("post", "turns", {"text": "hi", "\ud800": 1}),
        ("post", "turns", {"text": "hi \ud800"}),
    ],
)
def test_a_lone_surrogate_is_a_400_not_a_500(
    world: World, chat_url: str, method: str, route: str, body: dict[str, Any]
) -> None:
    """An unknown field (or a value) that is a lone surrogate is named in the 400; echoing it
    as it came made the JSON response unencodable, a 500."""
    url = {
        "chats": "/v1/chats",
        "settings": f"/v1/organizations/{world.org.id}/settings",
        "turns": chat_url,
    }[route]
    raw = json.dumps(with_bot(world, body))  # ASCII JSON text with a "\ud800" escape
    response = getattr(world.alice.client(), method)(url, raw, content_type="application/json")
    assert response.status_code == 400, (response.status_code, response.content)
    error(response)


# --- ids in the URL ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chats/chat_00000000000000000000",
        "/v1/chats/chat_00000000000000000000/items",
        "/v1/chats/" + "c" * 5000,
        "/v1/chats/%E2%98%83",
        "/v1/chats/a%00b",  # NUL: PostgreSQL text refuses it (a DataError, once a 500)
        "/v1/chats/a%00b/items",
        "/v1/organizations/a%00b/settings",
        "/v1/organizations/" + "o" * 5000 + "/settings",
        "/v1/nothing-here",
    ],
)
def test_unknown_ids_in_the_path_are_404(world: World, path: str) -> None:
    client = world.alice.client()
    for method in ("get", "delete"):
        response = getattr(client, method)(path)
        assert response.status_code in (404, 405), (path, response.status_code)
        error(response)


def test_nul_in_a_query_parameter_is_400_naming_it(world: World) -> None:
    response = world.alice.client().get(f"/v1/organizations/{world.org.id}/settings?tags=a%00b")
    assert_names(response, "tags")
