"""[F5] A purge of a chat learned through many turns keeps the pool's exclusive lock short: each
model call that carried its entries is found once, and the copies are removed before the lock is
taken; under it only the entries and the copies made since go."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from memory.lock import pool_read
from memory.models import Entry
from memorybot.models import Enrichment, EnrichmentEntry, ModelCall, ModelCallEntry
from memorybot.purge import memory_purge, model_call_store
from tests.conftest import Actor, World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact
from tests.memorybot.learning_world import waiting_for_advisory_locks

CALLS = 30
ENTRIES = 40  # every call carries them all: 1,200 rows of carried entries, 30 calls


def carrying(actor: Actor, entries: list[Entry], chat_id: str | None = None) -> ModelCall:
    """A learning call of `actor`'s that carried `entries`, recorded as the gateway does."""
    call = ModelCall(
        organization=actor.organization,
        bot_id=entries[0].bot_id,
        purpose=ModelCall.Purpose.LEARNING,
        model="fake:model",
        request="the entries, as the learning step shows them",
        status=ModelCall.Status.OK,
        chat_id=chat_id,
    )
    call.carried = tuple(entry.id for entry in entries)
    assert model_call_store(call)
    return call


@pytest.fixture
def learned(world: World) -> tuple[str, list[Entry]]:
    """A chat of alice's with ENTRIES facts, and CALLS calls in another chat carrying them."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    items = [ItemFactory.create(chat=chat, text=f"statement {n}") for n in range(ENTRIES)]
    entries = [fact([item], content=f"fact {n}") for n, item in enumerate(items)]
    for _ in range(CALLS):
        carrying(world.alice, entries)
    return chat.id, entries


def statements(captured: CaptureQueriesContext, start: str) -> list[str]:
    return [query["sql"] for query in captured.captured_queries if query["sql"].startswith(start)]


def test_each_call_that_carried_a_purged_entry_is_blanked_once(
    world: World, learned: tuple[str, list[Entry]]
) -> None:
    """The calls were found through the rows of the entries they carried: joined, each call
    came once per entry, and batches of 1,000 rows held 25 calls each (a minute for a
    400-entry chat). Found by id, the 30 calls are one batch."""
    chat_id, _ = learned
    with CaptureQueriesContext(connection) as captured:
        assert memory_purge(pool_id=world.bot.id, tag=f"chat:{chat_id}") == ENTRIES

    assert len(statements(captured, 'UPDATE "memorybot_modelcall"')) == 1
    assert ModelCall.objects.filter(blanked_at__isnull=True).count() == 0
    assert not ModelCallEntry.objects.exists()


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite has no advisory lock")
def test_the_copies_are_blanked_before_the_lock_is_taken(
    world: World, learned: tuple[str, list[Entry]]
) -> None:
    """Under the exclusive lock the purge deletes entries; the calls are blanked before."""
    chat_id, _ = learned
    with CaptureQueriesContext(connection) as captured:
        memory_purge(pool_id=world.bot.id, tag=f"chat:{chat_id}")

    sql = [query["sql"] for query in captured.captured_queries]
    locked = next(n for n, text in enumerate(sql) if "pg_advisory_xact_lock(" in text)
    under_lock = sql[locked:]
    assert not [text for text in under_lock if text.startswith('UPDATE "memorybot_modelcall"')]
    assert [text for text in sql[:locked] if text.startswith('UPDATE "memorybot_modelcall"')]


@pytest.fixture
def shared_lock_held(world: World) -> Iterator[threading.Event]:
    """A reader on its own connection holds the pool's lock shared until the event is set."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with pool_read(world.bot.id):
                taken.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    try:
        yield release
    finally:
        release.set()
        thread.join(30)


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite has no advisory lock")
@pytest.mark.django_db(transaction=True)
def test_copies_made_while_the_purge_waits_for_the_lock_go_too(
    world: World, learned: tuple[str, list[Entry]], shared_lock_held: threading.Event
) -> None:
    """A call recorded, and an enrichment stored, after the copies were removed but before the
    entries go still name an entry that exists: the purge removes them under the lock."""
    chat_id, entries = learned
    result: dict[str, Any] = {}

    def purge() -> None:
        try:
            result["removed"] = memory_purge(pool_id=world.bot.id, tag=f"chat:{chat_id}")
        finally:
            connections.close_all()

    purging = threading.Thread(target=purge)
    purging.start()
    for _ in range(200):
        if waiting_for_advisory_locks():
            break
        threading.Event().wait(0.05)
    assert waiting_for_advisory_locks()
    assert ModelCall.objects.filter(blanked_at__isnull=True).count() == 0
    # Recorded after the copies went: the rows a call and an enrichment write with themselves
    # (their own check, under the read lock, would wait behind the purge).
    late = ModelCall.objects.create(
        organization=world.alice.organization,
        bot=world.bot,
        purpose=ModelCall.Purpose.ENRICHMENT,
        model="fake:model",
        request="carries a fact of the purged chat",
        status=ModelCall.Status.OK,
    )
    ModelCallEntry.objects.create(call=late, entry_id=entries[0].id)
    other_chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    item = ItemFactory.create(chat=other_chat)
    assert item.turn is not None
    enrichment = Enrichment.objects.create(
        chat=other_chat, turn=item.turn, text="rewritten with a fact", original="as said"
    )
    EnrichmentEntry.objects.create(enrichment=enrichment, entry_id=entries[0].id)

    shared_lock_held.set()
    purging.join(30)

    assert result == {"removed": ENTRIES}
    late.refresh_from_db()
    assert (late.request, late.blanked_at is not None) == ("", True)
    assert not Enrichment.objects.filter(pk=enrichment.pk).exists()
