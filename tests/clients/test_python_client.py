"""[U3] The Python client (`clients/python/`) against a live server: its types are what the
generator writes from the live schema (a schema change the client does not follow fails here),
it has a method for every operation, and one scenario calls each of them over HTTP; errors
come as `MemoryApiError`, a 429 is retried after its `Retry-After`, and the `iter_*` helpers
follow `nextCursor` to the same lists."""

import re
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from openbot_memory_client import OPERATIONS, MemoryApiError, MemoryClient

from tests.conftest import World
from tests.memorybot.learning_world import flush_broker, learning_worker, memory_bot_on
from tests.memorybot.scenes import OFFLINE_MODEL

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(settings.BASE_DIR) / "clients" / "python"


@pytest.fixture
def server(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def schema(server: str) -> dict[str, Any]:
    loaded: dict[str, Any] = httpx.get(f"{server}/v1/schema", params={"format": "json"}).json()
    return loaded


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, re.Pattern[str], str]]:
    """(method, path pattern, operation id) of every operation of the schema."""
    for path, methods in schema["paths"].items():
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for method, operation in methods.items():
            if isinstance(operation, dict) and "operationId" in operation:
                yield method.upper(), pattern, operation["operationId"]


def test_the_types_are_what_the_live_schema_generates(schema: dict[str, Any]) -> None:
    generate = runpy.run_path(str(CLIENT / "generate.py"))["generate"]
    committed = (CLIENT / "openbot_memory_client" / "models.py").read_text()
    assert generate(schema) == committed, (
        "the schema changed: run clients/python/generate.py (see clients/python/README.md)"
    )


def test_every_operation_has_its_method(schema: dict[str, Any]) -> None:
    assert {operation for _, _, operation in operations(schema)} == set(OPERATIONS)
    for names in OPERATIONS.values():
        for name in names.split(", "):
            assert callable(getattr(MemoryClient, name)), name


class Recorded:
    """An httpx client that notes the operation of every request it sends."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.known = list(operations(schema))
        self.called: set[str] = set()
        self.sent = 0
        self.http = httpx.Client(timeout=30, event_hooks={"request": [self.note]})

    def note(self, request: httpx.Request) -> None:
        self.sent += 1
        for method, pattern, operation in self.known:
            if request.method == method and pattern.match(request.url.path):
                self.called.add(operation)


def client_of(server: str, token: str, recorded: Recorded, **options: Any) -> MemoryClient:
    return MemoryClient(server, token, http=recorded.http, **options)


def test_one_scenario_calls_every_operation(
    world: World, server: str, schema: dict[str, Any]
) -> None:
    flush_broker()
    memory_bot_on(world, OFFLINE_MODEL)
    recorded = Recorded(schema)
    alice = client_of(server, world.alice.token, recorded)
    org, bot = world.org.id, world.bot.id

    assert alice.my_settings() == {"learnFromMe": True}
    assert alice.my_settings_update(learn_from_me=True) == {"learnFromMe": True}
    assert alice.organization_settings(org)["botMemoryModel"] == OFFLINE_MODEL
    changed = alice.organization_settings_update(org, {"botMemoryModel": OFFLINE_MODEL})
    assert changed == {"botMemory": True, "botMemoryModel": OFFLINE_MODEL}
    assert alice.channel_update(org, world.channel.id, {"learning": True})["learning"] is True

    chat = alice.chat_create(bot)
    assert alice.chat(chat["id"]) == chat
    turn = alice.turn(chat["id"], "I live in Hamburg and I am allergic to peanuts.")
    assert turn["turn"]["endedAt"] is not None
    with learning_worker():
        pass
    items = alice.items(chat["id"])["items"]
    assert [item["kind"] for item in items][:1] == ["person"]
    assert list(alice.iter_items(chat["id"], page_size=1)) == items
    assert (
        list(alice.iter_confessions(chat["id"], page_size=1))
        == (alice.confessions(chat["id"])["confessions"])
    )
    assert (
        list(alice.iter_enrichments(chat["id"], page_size=1))
        == (alice.enrichments(chat["id"])["enrichments"])
    )
    [run] = alice.learning_runs(chat["id"])["runs"]
    assert (run["status"], run["applied"]) == ("done", 2)
    assert list(alice.iter_learning_runs(chat["id"], page_size=1)) == [run]

    entries = alice.memory(bot)["entries"]
    assert sorted(entry["content"] for entry in entries) == [
        "I am allergic to peanuts.",
        "I live in Hamburg.",
    ]
    assert list(alice.iter_memory(bot, page_size=1)) == entries
    assert alice.entry(bot, entries[0]["id"]) == entries[0]
    [found] = alice.search(bot, "Where do I live?", limit=1)["entries"]
    assert found["content"] == "I live in Hamburg."
    pinned = alice.remember(bot, "I prefer green tea.", tags=["tea"], said_at=1_700_000_000_000)
    assert (pinned["layer"], pinned["saidAt"]) == ("pinned", 1_700_000_000_000)
    assert alice.memory(bot, tags=["tea"])["entries"] == [pinned]
    assert alice.forget(bot, found["id"]) == {"ok": True}
    log = alice.memory_log(bot)["changes"]
    assert list(alice.iter_memory_log(bot, page_size=1)) == log

    memory_bot = alice.memory_bot_settings(bot)
    update = alice.memory_bot_settings_update(
        bot, {"expected": memory_bot["version"], "instructions": "Keep it short."}
    )
    assert update["instructions"] == "Keep it short."
    assert alice.forget_mine(bot)["retracted"] == 2
    assert alice.purge(bot, f"chat:{chat['id']}")["removed"] >= 0
    export = alice.my_export()
    assert export["person"]["id"] == world.alice.person.id
    alice.items_delete(chat["id"])
    assert alice.items(chat["id"]) == {"items": []}

    assert recorded.called == set(OPERATIONS)


def test_errors_are_one_exception_with_the_api_shape(world: World, server: str) -> None:
    alice = MemoryClient(server, world.alice.token)
    with pytest.raises(MemoryApiError) as unknown:
        alice.entry(world.bot.id, "mem_nope")
    assert (unknown.value.status, unknown.value.code) == (404, "not_found")
    with pytest.raises(MemoryApiError) as refused:
        alice.remember(world.bot.id, "I like tea.", tags=["Tea:Time"])
    assert refused.value.status == 400 and "command.tags" in refused.value.fields
    with pytest.raises(MemoryApiError) as outsider:
        MemoryClient(server, world.dave.token).memory(world.bot.id)
    assert outsider.value.status == 404
    # An id is one path segment: it never reaches another route.
    with pytest.raises(MemoryApiError) as elsewhere:
        alice.chat(f"../bots/{world.bot.id}/memory")
    assert elsewhere.value.status == 404
    with pytest.raises(MemoryApiError) as unauthenticated:
        MemoryClient(server, "obt_not-a-token").memory(world.bot.id)
    assert (unauthenticated.value.status, unauthenticated.value.code) == (401, "unauthenticated")


def test_a_429_is_sent_again_after_its_retry_after(
    world: World, server: str, schema: dict[str, Any]
) -> None:
    cache.clear()
    limits = {"token": "1/s", "writes": None, "auth_failures": None}
    with override_settings(OPENBOT_THROTTLE_RATES=limits):
        recorded = Recorded(schema)
        patient = client_of(server, world.alice.token, recorded)
        patient.memory(world.bot.id)
        # Throttled, told to wait a second, sent again: answered.
        assert patient.memory(world.bot.id) == {"entries": [], "version": 0}
        assert recorded.sent == 3
        # A client that may not wait that long gives the 429 back at once, with its
        # Retry-After; so does one whose retries are spent.
        for options in ({"max_wait": 0.5}, {"retries": 0}):
            hasty_calls = Recorded(schema)
            hasty = client_of(server, world.alice.token, hasty_calls, **options)
            with pytest.raises(MemoryApiError) as throttled:
                hasty.memory(world.bot.id)
            assert throttled.value.status == 429 and throttled.value.retry_after == 1
            assert hasty_calls.sent == 1, options
    cache.clear()
