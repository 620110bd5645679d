"""[L1, Q3] Reads never mix old rights with new contents (PostgreSQL only).

Readers run in threads with their own connections, each read done the way the memory route
does it (one `entries_for_reader` call) or a turn's enrichment does it (`context` without a
query), for a reader whose rights it reads itself: as last read in the process, checked in the
read's own statement, or under the pool's lock. A writer in
parallel first revokes a source — the reader leaves the channel, or a source is invalidated —
and then adds new content. A read may show the old state (source visible, new entry absent) or
the new one (source hidden, new entry present), never the new entry together with the revoked
source.
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction

from memory.access import Reader
from memory.lock import pool_read, pool_write
from memory.models import Change, Entry
from memory.selectors import context, entries_for_reader
from memory.services import (
    ItemEvidence,
    entry_create_in,
    entry_remember,
    entry_set_status_in,
    pool_change,
)
from openbot import services
from openbot.models import Bot, Organization, Person

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="advisory locks and parallel readers need PG"
    ),
    pytest.mark.django_db(transaction=True),
]

READERS = 4
ROUNDS = 25


@dataclass
class Place:
    org: Organization
    bot: Bot
    alice: Person
    carol: Person
    # "listing" (GET memory) or "context" (a turn's enrichment, no query).
    way: str

    def read(self) -> set[str]:
        """One read of alice's entries."""
        reader = Reader(organization_id=self.org.id, person_id=self.alice.id, bot=self.bot)
        if self.way == "context":
            return set(context(self.bot, reader, limit=1_000_000).entry_ids)
        entries, _ = entries_for_reader(pool_id=self.bot.id, reader=reader, tags=[])
        return {entry["id"] for entry in entries}


@pytest.fixture(params=["listing", "context"])
def place(request: pytest.FixtureRequest) -> Place:
    org = services.organization_create(name="Org")
    alice = services.person_create(organization=org, name="alice")
    carol = services.person_create(organization=org, name="carol")
    bot = services.bot_create(organization=org)
    services.grant_set(bot=bot, level="read", organization=org)
    return Place(org=org, bot=bot, alice=alice, carol=carol, way=request.param)


@dataclass
class Race:
    reads: list[set[str]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    # (revoked source, new entry) per round: never both in one read.
    pairs: list[tuple[str, str]] = field(default_factory=list)


def in_thread(race: Race, work: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test, not lost in the thread
            race.errors.append(error)
        finally:
            connections.close_all()

    return threading.Thread(target=run)


def run_race(place: Place, write_round: Callable[[int], tuple[str, str]]) -> Race:
    race = Race()
    stop = threading.Event()

    def read_loop() -> None:
        while not stop.is_set():
            race.reads.append(place.read())

    def write_loop() -> None:
        try:
            for round_number in range(ROUNDS):
                race.pairs.append(write_round(round_number))
        finally:
            stop.set()

    threads = [in_thread(race, read_loop) for _ in range(READERS)]
    threads.append(in_thread(race, write_loop))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert race.errors == []
    return race


def assert_no_new_content_under_old_rights(race: Race) -> None:
    mixed = [
        (source, new)
        for ids in race.reads
        for source, new in race.pairs
        if source in ids and new in ids
    ]
    assert mixed == []
    # The race did happen: both states were read many times.
    sources = {source for source, _ in race.pairs}
    news = {new for _, new in race.pairs}
    assert sum(1 for ids in race.reads if ids & sources) > 0
    assert sum(1 for ids in race.reads if ids & news) > 0


def test_leaving_a_channel_before_new_content(place: Place) -> None:
    """Revoke by membership [H5]: alice leaves the channel, then gets a new pinned entry."""

    def write_round(round_number: int) -> tuple[str, str]:
        channel = services.channel_create(
            organization=place.org, members=[place.alice, place.carol]
        )
        with pool_change(pool_id=place.bot.id, by=Change.By.MEMORY_BOT) as change:
            group = entry_create_in(
                change,
                layer=Entry.Layer.FACT,
                content=f"group fact {round_number}",
                tags=[
                    f"from:{place.carol.id}",
                    f"for:channel:{channel.id}",
                    f"org:{place.org.id}",
                    f"channel:{channel.id}",
                    "chat:chat_group",
                ],
                source_items=[("chat_group", round_number)],
                evidence=[
                    ItemEvidence("chat_group", round_number, f"channel:{channel.id}", place.org.id)
                ],
            )
        time.sleep(0.005)  # let the readers see the old state
        services.channel_member_remove(channel=channel, person=place.alice)
        new = entry_remember(
            pool_id=place.bot.id,
            person_id=place.alice.id,
            organization_id=place.org.id,
            content=f"new content {round_number}",
            topics=[],
        )
        time.sleep(0.005)
        return group.id, new.id

    assert_no_new_content_under_old_rights(run_race(place, write_round))


def test_invalidating_a_source_before_new_content(place: Place) -> None:
    """Revoke by status [V6]: the source of a conclusion is invalidated, then new content."""

    alice, org = place.alice.id, place.org.id
    private = [f"from:{alice}", f"for:person:{alice}", f"org:{org}"]

    def write_round(round_number: int) -> tuple[str, str]:
        with pool_change(pool_id=place.bot.id, by=Change.By.MEMORY_BOT) as change:
            source = entry_create_in(
                change,
                layer=Entry.Layer.FACT,
                content=f"private fact {round_number}",
                tags=[*private, "chat:chat_private"],
                source_items=[("chat_private", round_number)],
                evidence=[ItemEvidence("chat_private", round_number, f"person:{alice}", org)],
            )
            conclusion = entry_create_in(
                change,
                layer=Entry.Layer.OBSERVATION,
                content=f"conclusion {round_number}",
                tags=[*private, "chat:chat_private"],
                source_entries=[source.id],
                confidence=0.9,
            )
        time.sleep(0.005)  # let the readers see the old state
        with pool_change(pool_id=place.bot.id, by=Change.By.MEMORY_BOT) as change:
            entry_set_status_in(change, entry_id=source.id, status=Entry.Status.INVALIDATED)
        with pool_change(pool_id=place.bot.id, by=Change.By.PERSON) as change:
            note = entry_create_in(
                change,
                layer=Entry.Layer.PINNED,
                content=f"new note {round_number}",
                tags=private,
                evidence=[ItemEvidence("", 0, f"person:{alice}", org)],
            )
            new = entry_create_in(
                change,
                layer=Entry.Layer.OBSERVATION,
                content=f"new conclusion {round_number}",
                tags=private,
                source_entries=[note.id],
                confidence=0.9,
            )
        time.sleep(0.005)
        # The conclusion over the invalidated source must never be seen with the new one.
        return conclusion.id, new.id

    assert_no_new_content_under_old_rights(run_race(place, write_round))


# --- The lock itself ------------------------------------------------------------------------


def hold(
    race: Race, lock: Callable[[str], Any], pool_id: str
) -> tuple[threading.Thread, threading.Event, threading.Event]:
    held, release = threading.Event(), threading.Event()

    def work() -> None:
        with lock(pool_id):
            held.set()
            release.wait(timeout=30)

    thread = in_thread(race, work)
    thread.start()
    assert held.wait(timeout=10)
    return thread, held, release


def read_with_timeout(pool_id: str, timeout_ms: int) -> None:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{timeout_ms}ms'")
        with pool_read(pool_id):
            pass


def test_a_change_blocks_readers(place: Place) -> None:
    race = Race()
    thread, _, release = hold(race, pool_write, place.bot.id)
    try:
        with pytest.raises(OperationalError, match="lock timeout"):
            read_with_timeout(place.bot.id, 200)
    finally:
        release.set()
        thread.join(timeout=10)
    assert race.errors == []
    read_with_timeout(place.bot.id, 200)


def read_while_a_change_writes(place: Place) -> tuple[set[str], str]:
    """One read while a change holding the pool's lock writes a new entry for alice: what the
    read saw, and the new entry."""
    race = Race()
    held = threading.Event()
    written: list[str] = []

    def write() -> None:
        with pool_change(pool_id=place.bot.id, by=Change.By.PERSON) as change:
            held.set()
            time.sleep(0.3)
            written.append(
                entry_create_in(
                    change,
                    layer=Entry.Layer.PINNED,
                    content="written while the reader waits",
                    tags=[f"for:person:{place.alice.id}", f"org:{place.org.id}"],
                    evidence=[ItemEvidence("", 0, f"person:{place.alice.id}", place.org.id)],
                ).id
            )

    writer = in_thread(race, write)
    writer.start()
    assert held.wait(timeout=10)
    seen = place.read()
    writer.join(timeout=10)
    assert race.errors == []
    return seen, written[0]


def test_a_reader_waits_for_the_change_and_then_sees_it(place: Place) -> None:
    seen, written = read_while_a_change_writes(place)
    # Uncommitted rows are invisible: seeing the entry means the read waited for the commit.
    assert seen == {written}


def test_a_reader_who_sees_entries_waits_for_the_change_too(place: Place) -> None:
    """[L1, Q4] The listing or context of a reader who sees entries is one statement outside
    a transaction; it takes the lock shared too, and reads again under it when a change holds
    it."""
    before = entry_remember(
        pool_id=place.bot.id,
        person_id=place.alice.id,
        organization_id=place.org.id,
        content="there before the change",
        topics=[],
    ).id
    assert place.read() == {before}  # the rights are known: the next read is one statement
    seen, written = read_while_a_change_writes(place)
    assert seen == {before, written}


def test_readers_share_the_lock(place: Place) -> None:
    race = Race()
    thread, _, release = hold(race, pool_read, place.bot.id)
    try:
        read_with_timeout(place.bot.id, 200)
    finally:
        release.set()
        thread.join(timeout=10)
    assert race.errors == []


def test_other_pools_are_not_blocked(place: Place) -> None:
    other = services.bot_create(organization=place.org)
    race = Race()
    thread, _, release = hold(race, pool_write, place.bot.id)
    try:
        read_with_timeout(other.id, 200)
    finally:
        release.set()
        thread.join(timeout=10)
    assert race.errors == []
