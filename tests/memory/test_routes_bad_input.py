"""Bad input on every memory route is a 4xx that names the field, never a 500 [§8]."""

import json
from typing import Any

import pytest

from memory.models import Change, Entry, Pool
from memory.services import REMEMBER_MAX_CONTENT
from tests.conftest import World, error_fields

TOO_LONG = "x" * (REMEMBER_MAX_CONTENT + 1)  # [E8]
COMMAND_CASES: list[tuple[Any, str]] = [
    # (body, the field the 400 must name)
    ([], "body"),
    ("Remember", "body"),
    (5, "body"),
    (None, "body"),
    ({}, "command"),
    ({"command": None}, "command"),
    ({"command": "Remember"}, "command"),
    ({"command": ["Remember"]}, "command"),
    ({"command": 1}, "command"),
    ({"command": {"_tag": "Remember", "content": "x"}, "extra": 1}, "extra"),
    ({"command": {}}, "command._tag"),
    ({"command": {"_tag": 5}}, "command._tag"),
    ({"command": {"_tag": None}}, "command._tag"),
    ({"command": {"_tag": "remember", "content": "x"}}, "command._tag"),
    ({"command": {"_tag": "Remember"}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": None}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": 5}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": ["x"]}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": ""}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": TOO_LONG}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": "a\x00b"}}, "command.content"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": "testing"}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": [5]}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": [None]}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": {"a": 1}}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": ["t"] * 33}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "tags": ["org:o_1"]}}, "command.tags"),
    ({"command": {"_tag": "Remember", "content": "x", "id": "mem_1"}}, "command.id"),
    ({"command": {"_tag": "Remember", "content": "x", "why": 1}}, "command.why"),
    ({"command": {"_tag": "Forget"}}, "command.id"),
    ({"command": {"_tag": "Forget", "id": 5}}, "command.id"),
    ({"command": {"_tag": "Forget", "id": None}}, "command.id"),
    ({"command": {"_tag": "Forget", "id": "m" * 41}}, "command.id"),
    ({"command": {"_tag": "Forget", "id": "mem_1", "content": "x"}}, "command.content"),
    ({"command": {"_tag": "Forget", "id": "mem_1", "tags": []}}, "command.tags"),
    ({"command": {"_tag": "ForgetMine", "id": "mem_1"}}, "command.id"),  # [D2]
    ({"command": {"_tag": "ForgetMine", "content": "x"}}, "command.content"),
    ({"command": {"_tag": "forgetMine"}}, "command._tag"),
    # A lone surrogate echoed in the message once made the response unencodable (a 500).
    ({"command": {"_tag": "\ud800"}}, "command._tag"),
    ({"command": {"_tag": "Remember", "content": "x", "\ud800": 1}}, "command"),
    ({"command": {"_tag": "Remember", "content": "x"}, "\ud800": 1}, "\\ud800"),
]
PURGE_CASES: list[tuple[Any, str]] = [
    ([], "body"),
    ("from:u_1", "body"),
    (None, "body"),
    ({}, "tag"),
    ({"tag": None}, "tag"),
    ({"tag": 5}, "tag"),
    ({"tag": ["from:u_1"]}, "tag"),
    ({"tag": "from:" + "u" * 200}, "tag"),
    ({"tag": "from:u_1", "tags": ["x"]}, "tags"),
    ({"tag": "for:bot"}, "tag"),
    ({"tag": "from:u_\ud800"}, "tag"),
    ({"tag": "from:u_1", "\ud800": 1}, "\\ud800"),
]
SETTINGS_CASES: list[tuple[Any, str]] = [
    ([], "body"),
    (None, "body"),
    ({}, "expected"),
    ({"expected": None}, "expected"),
    ({"expected": "0"}, "expected"),
    ({"expected": 0.0}, "expected"),
    ({"expected": True}, "expected"),
    ({"expected": -1}, "expected"),
    ({"expected": 2**40}, "expected"),
    ({"expected": 0, "instructions": 5}, "instructions"),
    ({"expected": 0, "instructions": None}, "instructions"),
    ({"expected": 0, "instructions": "x" * 10_001}, "instructions"),
    ({"expected": 0, "concurrency": "2"}, "concurrency"),
    ({"expected": 0, "concurrency": 2.5}, "concurrency"),
    ({"expected": 0, "concurrency": True}, "concurrency"),
    ({"expected": 0, "concurrency": 0}, "concurrency"),
    ({"expected": 0, "concurrency": -1}, "concurrency"),
    ({"expected": 0, "budget": "month"}, "budget"),
    ({"expected": 0, "budget": 5}, "budget"),
    ({"expected": 0, "budget": []}, "budget"),
    ({"expected": 0, "budget": {"period": "month"}}, "budget.limitMicros"),
    ({"expected": 0, "budget": {"limitMicros": 5}}, "budget.period"),
    ({"expected": 0, "budget": {"period": "week", "limitMicros": 5}}, "budget.period"),
    ({"expected": 0, "budget": {"period": "day", "limitMicros": -1}}, "budget.limitMicros"),
    ({"expected": 0, "budget": {"period": "day", "limitMicros": "5"}}, "budget.limitMicros"),
    ({"expected": 0, "budget": {"period": "day", "limitMicros": 1.5}}, "budget.limitMicros"),
    ({"expected": 0, "budget": {"period": "day", "limitMicros": 5, "x": 1}}, "budget.x"),
    ({"expected": 0, "version": 1}, "version"),
    ({"expected": 0, "budget": {"period": "\ud800", "limitMicros": 5}}, "budget.period"),
    ({"expected": 0, "\ud800": 1}, "\\ud800"),
]


def send(world: World, method: str, path: str, body: Any) -> Any:
    """Send `body` as JSON text, whatever its type (DRF's test client would form-encode)."""
    client = world.alice.client()
    return getattr(client, method)(
        f"/v1/bots/{world.bot.id}/memory{path}",
        json.dumps(body),
        content_type="application/json",
    )


def assert_names(response: Any, field: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content)
    fields = error_fields(response)
    assert any(name == field or name.startswith(f"{field}.") for name in fields), fields
    assert field in response.json()["error"]["message"]


def test_every_case_is_distinct() -> None:
    for cases in (COMMAND_CASES, PURGE_CASES, SETTINGS_CASES):
        assert len({json.dumps(body) for body, _ in cases}) == len(cases)


@pytest.mark.parametrize(("body", "field"), COMMAND_CASES)
def test_memory_command(world: World, body: Any, field: str) -> None:
    assert_names(send(world, "post", "", body), field)
    assert not Entry.objects.exists()
    assert not Change.objects.exists()


def test_content_of_exactly_the_limit_is_fine(world: World) -> None:
    body = {
        "command": {"_tag": "Remember", "content": "x" * REMEMBER_MAX_CONTENT, "tags": ["t"] * 32}
    }
    assert send(world, "post", "", body).status_code == 201


@pytest.mark.parametrize(("body", "field"), PURGE_CASES)
def test_purge(world: World, body: Any, field: str) -> None:
    assert_names(send(world, "post", "/purge", body), field)
    assert not Change.objects.exists()


@pytest.mark.parametrize(("body", "field"), SETTINGS_CASES)
def test_settings(world: World, body: Any, field: str) -> None:
    assert_names(send(world, "patch", "/bot", body), field)
    assert not Pool.objects.filter(settings_version__gt=0).exists()


@pytest.mark.parametrize(("method", "path"), [("post", ""), ("post", "/purge"), ("patch", "/bot")])
@pytest.mark.parametrize(
    "raw", [b"", b"{", b"not json", b'{"command": ', b"\xff\xfe", b"[" * 100_000]
)
def test_unparseable_bodies(world: World, method: str, path: str, raw: bytes) -> None:
    response = getattr(world.alice.client(), method)(
        f"/v1/bots/{world.bot.id}/memory{path}", raw, content_type="application/json"
    )

    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert "body" in body["error"]["message"] or error_fields(response)


@pytest.mark.parametrize(("method", "path"), [("post", ""), ("post", "/purge"), ("patch", "/bot")])
def test_a_body_that_is_not_json_is_refused(world: World, method: str, path: str) -> None:
    response = getattr(world.alice.client(), method)(
        f"/v1/bots/{world.bot.id}/memory{path}", "tag=from:u_1", content_type="text/plain"
    )

    assert response.status_code == 415
    assert "body" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?tags=" + ",".join(f"t{n}" for n in range(33)), "tags"),
        ("?tags=" + "x" * 201, "tags"),
        ("?tags=a%00b", "tags"),
    ],
)
def test_memory_query(world: World, query: str, field: str) -> None:
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory{query}")
    assert_names(response, field)


@pytest.mark.parametrize("query", ["?tags=", "?tags=,,", "?tags=Not%20A%20Topic", "?other=1"])
def test_harmless_queries_are_fine(world: World, query: str) -> None:
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory{query}")
    assert response.status_code == 200
    assert response.json() == {"entries": [], "version": 0}


@pytest.mark.parametrize(
    "bot_id", ["bot_%00", "x" * 300, "%E2%80%AE", "bot_1%20or%201=1", "..", "%2e%2e"]
)
def test_odd_bot_ids_are_not_found(world: World, bot_id: str) -> None:
    for path in ["", "/log", "/bot"]:
        response = world.alice.client().get(f"/v1/bots/{bot_id}/memory{path}")
        assert response.status_code == 404, (bot_id, path, response.content)


@pytest.mark.parametrize(("method", "path"), [("post", ""), ("post", "/purge"), ("patch", "/bot")])
def test_a_body_over_the_upload_limit_is_refused(world: World, method: str, path: str) -> None:
    body = {"command": {"_tag": "Remember", "content": "x" * 2_000_000}}

    response = send(world, method, path, body)

    assert response.status_code == 413
    assert "body" in response.json()["error"]["message"]
    assert not Entry.objects.exists()
