"""Shared set-up of the learning tests [§12], all through the real code paths.

- The memory bot's model is `openai:gpt-test` on the fake server (real HTTP); the bot itself
  keeps the built-in offline model, which confides once per turn, so a confided turn is just
  `turn_run` — the turn runner stores the run and records "turn ended" [F4, W1, W2].
- The fake answers the memory bot's confide (and any enrichment) with its default reply; a
  test queues the learning answer after the turns it needs, so it goes to the learning step.
- `learning_worker` runs a real Dramatiq worker on the configured broker (the StubBroker in
  tests) with the real middleware, recovery included.
"""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dramatiq
import pytest
from django.conf import settings
from django.db import connection
from dramatiq.brokers.stub import StubBroker

from chats import services as chat_services
from chats.models import Chat, Item, Turn
from conversations.turns import turn_run
from memory.models import Entry, EntryTag
from memorybot.learning_step import LEARN_PROMPT
from memorybot.models import LearningRun
from openbot import services
from tests.conftest import Actor, World
from tests.factories import ChatFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI, FakeReply, ReceivedRequest
from tests.memory.builders import fact, set_status
from tests.memorybot.conftest import PRICE

MEMORY_MODEL = "openai:gpt-test"

# Separate connections racing for real locks: SQLite serializes, so these run on PostgreSQL.
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL (real concurrent connections)"
)


def memory_bot_on(world: World, model: str | None = MEMORY_MODEL) -> None:
    """[H1, B1] Org A's memory bot uses `model`."""
    services.organization_settings_update(organization=world.org, bot_memory_model=model)


def confided_turn(chat: Chat, actor: Actor, text: str) -> Turn:
    """One turn through the turn runner; the bot's offline model confides once [F1, F4]."""
    return turn_run(chat=chat, person=actor.person, text=text).turn


@dataclass
class Scene:
    """alice's private chat: an OpenBot notice, a calendar tool result, then a confided turn
    (her words and the bot's answer). In the pool: alice's own fact, bob's private fact and an
    invalidated fact of alice's."""

    chat: Chat
    turn: Turn
    notice: Item
    tool_result: Item
    said: Item
    answered: Item
    mine: Entry
    bobs: Entry
    old: Entry


def private_fact(world: World, actor: Actor, content: str) -> Entry:
    chat = ChatFactory.create(owner=actor, bot=world.bot)
    return fact([ItemFactory.create(chat=chat, person=actor.person)], content=content)


def learning_scene(world: World, said: str) -> Scene:
    """The scene above, alice saying `said`; the memory bot on the fake server."""
    memory_bot_on(world)
    mine = private_fact(world, world.alice, "alice likes tea")
    bobs = private_fact(world, world.bob, "bob's secret")
    old = private_fact(world, world.alice, "an old fact")
    set_status(old, Entry.Status.INVALIDATED)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    notice = chat_services.notice_append(chat=chat, text="The calendar app was connected.")
    tool_result = chat_services.tool_result_append(
        chat=chat, app="calendar", tool="lookup", text="Dentist on Friday at 9."
    )
    turn = confided_turn(chat, world.alice, said)
    return Scene(
        chat=chat,
        turn=turn,
        notice=notice,
        tool_result=tool_result,
        said=person_item(turn),
        answered=bot_item(turn),
        mine=mine,
        bobs=bobs,
        old=old,
    )


def person_item(turn: Turn) -> Item:
    return Item.objects.get(chat_id=turn.chat_id, seq=turn.input_seq)


def bot_item(turn: Turn) -> Item:
    return Item.objects.get(chat_id=turn.chat_id, turn=turn, kind=Item.Kind.BOT)


def run_of(turn: Turn) -> LearningRun:
    return LearningRun.objects.get(turn=turn)


def ref(item: Item) -> dict[str, str]:
    """A fact's source as the model names it."""
    return {"chat": item.chat_id, "item": item.public_id}


def fact_change(content: str, *items: Item, topics: list[str] | None = None) -> dict[str, Any]:
    return {
        "kind": "add",
        "layer": "fact",
        "content": content,
        "sources": [ref(item) for item in items],
        "topics": topics or [],
    }


def observation_change(
    content: str, *sources: str, confidence: Any = 0.8, **extra: Any
) -> dict[str, Any]:
    return {
        "kind": "add",
        "layer": "observation",
        "content": content,
        "sources": [{"entry": source} for source in sources],
        "confidence": confidence,
        "topics": [],
        **extra,
    }


def learning_answer(fake: FakeOpenAI, changes: list[Any], **kwargs: Any) -> FakeReply:
    """Queue the model's answer to the next learning step."""
    return fake.reply(content=json.dumps({"changes": changes}), **kwargs)


def is_learning(request: ReceivedRequest) -> bool:
    body = request.body if isinstance(request.body, dict) else {}
    messages = body.get("messages") or [{}]
    return bool(messages[0].get("content") == LEARN_PROMPT)


def learning_requests(fake: FakeOpenAI) -> list[ReceivedRequest]:
    return [request for request in fake.requests if is_learning(request)]


def learning_prompt(request: ReceivedRequest) -> str:
    """The user message of a learning request: items, existing notes, topic counts."""
    content: str = request.body["messages"][-1]["content"]
    return content


def learned(chat: Chat) -> list[Entry]:
    """Entries learned from `chat`: oldest first, then by content."""
    ids = EntryTag.objects.filter(tag=f"chat:{chat.id}").values_list("entry_id", flat=True)
    entries = Entry.objects.filter(id__in=ids)
    return sorted(entries, key=lambda entry: (entry.created_at, entry.content))


def tags_of(entry: Entry) -> set[str]:
    return set(EntryTag.objects.filter(entry=entry).values_list("tag", flat=True))


def stub_broker() -> StubBroker:
    """The configured broker: settings.test has no OPENBOT_BROKER_URL, so the StubBroker."""
    broker = dramatiq.get_broker()
    assert isinstance(broker, StubBroker)
    return broker


@contextmanager
def learning_worker(threads: int = 2, timeout_s: float = 30) -> Iterator[StubBroker]:
    """A real Dramatiq worker on the configured broker (StubBroker in tests) with the
    configured middleware — the learning recovery pass included. On leaving, waits until
    every message of the learning queue is processed (at most `timeout_s`), then stops the
    worker."""
    broker = stub_broker()
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=50)
    worker.start()
    try:
        yield broker
        broker.join("learning", fail_fast=True, timeout=int(timeout_s * 1000))
        worker.join()
    finally:
        worker.stop(timeout=10_000)


def flush_broker() -> None:
    """Messages left in the StubBroker by earlier tests name rows that no longer exist."""
    stub_broker().flush_all()


def worker_environment(*, broker_url: str, model_url: str) -> dict[str, str]:
    """The environment of a worker (or server) process of its own on this test's PostgreSQL
    database and on `broker_url`, with the memory bot's model on the fake server at
    `model_url`."""
    database = connection.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT'] or 5432}/{database['NAME']}"
        ),
        "OPENBOT_BROKER_URL": broker_url,
        "OPENBOT_INPROCESS_WORKER": "false",
        "OPENBOT_ENCRYPTION_KEYS": ",".join(settings.OPENBOT_ENCRYPTION_KEYS),
        "OPENBOT_OPENAI_BASE_URL": model_url,
        "OPENBOT_OPENAI_API_KEY": "test-key",
        "OPENBOT_MODEL_PRICES": PRICE,
    }


def waiting_for_advisory_locks() -> int:
    """How many sessions on this test's database wait for an advisory lock (a pool's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        (count,) = cursor.fetchone()
    return int(count)
