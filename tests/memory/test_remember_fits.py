"""[E8] (sharpens [S1]) A Remembered entry always fits the enrichment context: Remember refuses
content longer than the context's room with a 400 naming `content`, and what it takes is
offered whole to the enrichment model."""

from typing import Any

import pytest
from django.test import Client

from memory.access import Reader
from memory.models import Change, Entry
from memory.rows import CONTEXT_LINE_OVERHEAD
from memory.selectors import ENRICHMENT_CONTEXT_LIMIT, context
from memory.services import REMEMBER_MAX_CONTENT, entry_remember
from openbot.errors import ApplicationError
from tests.conftest import World, error_fields
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    bot_model_set,
    chat_open,
    enrich_requests,
    enrichment_answer,
    memory_model_set,
    take_turn,
)


def remember(world: World, content: str) -> Any:
    body = {"command": {"_tag": "Remember", "content": content}}
    return world.alice.client().post(f"/v1/bots/{world.bot.id}/memory", body, format="json")


def alices_context(world: World) -> list[str]:
    reader = Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )
    return context(world.bot, reader, ENRICHMENT_CONTEXT_LIMIT).entry_ids


def test_the_room_is_the_enrichment_contexts_less_one_line() -> None:
    """[E8] One limit: the enrichment's own, less the line an entry takes in it [S1]."""
    assert REMEMBER_MAX_CONTENT == ENRICHMENT_CONTEXT_LIMIT - CONTEXT_LINE_OVERHEAD


def test_content_at_the_limit_is_remembered_and_fits_the_context(world: World) -> None:
    # Surrounding whitespace is trimmed before it is measured.
    response = remember(world, "  " + "x" * REMEMBER_MAX_CONTENT + "\n")

    assert response.status_code == 201, response.json()
    assert len(response.json()["content"]) == REMEMBER_MAX_CONTENT
    assert alices_context(world) == [response.json()["id"]]


def test_content_one_over_the_limit_is_refused_naming_content(world: World) -> None:
    response = remember(world, "x" * (REMEMBER_MAX_CONTENT + 1))

    assert response.status_code == 400
    assert set(error_fields(response)) == {"command.content"}
    assert not Entry.objects.exists()
    assert not Change.objects.exists()


@pytest.mark.parametrize(
    ("length", "kept"), [(REMEMBER_MAX_CONTENT, True), (REMEMBER_MAX_CONTENT + 1, False)]
)
def test_the_python_api_keeps_the_same_limit(world: World, length: int, kept: bool) -> None:
    """[E8] `entry_remember` decides it too, for server callers: a 400 naming `content`."""

    def call() -> Entry:
        return entry_remember(
            pool_id=world.bot.id,
            person_id=world.alice.person.id,
            organization_id=world.org.id,
            content="y" * length,
            topics=[],
        )

    if kept:
        entry = call()
        assert alices_context(world) == [entry.id]
        return
    with pytest.raises(ApplicationError) as refused:
        call()
    assert refused.value.status == 400
    assert set(refused.value.fields or {}) == {"content"}
    assert not Entry.objects.exists()


def test_the_enrichment_model_is_offered_an_entry_at_the_limit(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[E8, N1] End to end: the longest Remembered entry reaches the enrichment model whole."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    content = "z" * REMEMBER_MAX_CONTENT
    entry_id = remember(world, content).json()["id"]
    chat_id = chat_open(world.alice, world.bot)
    fake_openai.reply(content=enrichment_answer("Which trail?", []))
    fake_openai.reply(content="The lake loop.")

    take_turn(world.alice, chat_id, "Which trail?")

    [request] = enrich_requests(fake_openai)
    notes = request.body["messages"][1]["content"]
    assert f"[{entry_id}]" in notes
    assert content in notes


def test_the_schema_shows_the_limit(db: Any) -> None:
    schema = Client().get("/v1/schema?format=json").json()
    content = schema["components"]["schemas"]["RememberCommandRequest"]["properties"]["content"]
    assert content["maxLength"] == REMEMBER_MAX_CONTENT
