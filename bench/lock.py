"""[L2] How long each kind of change holds a pool's exclusive lock, and how long a reader waits
behind it: `python -m bench --lock` (PostgreSQL).

The pool: 100,000 entries (the last of `--sizes`) built by `bench.pool` for a bot of its own
(`bench-lock-100000`), to which each run imports a 1,000-deep chain of observations over one
private fact, and facts with 1,000 observations each over them (fan-outs). A hold is timed
inside the service, from the moment PostgreSQL grants the exclusive advisory lock until the
transaction has committed. Next to every figure stands a floor measured in the same run: a
change that takes the lock and only updates the pool's version row.

All the while a reader thread with its own connection reads one entry the way the memory
routes do (rights as of now, then the shared lock, the access rule and the entry's body), and
records how long it waited for the shared lock; its floor is the same wait before any change.
At the end the chain and the fan-outs are purged (timed as purges), and so are two chats learned
through turns [F5] (400 and 1,000 turns, one fact each, with the model calls and enrichments that
carried those facts, as `add_learned_chat` writes them): their purge also removes those copies
[P4], which it does before it takes the lock; its time in all is printed beside its hold.

PostgreSQL on the development machine runs without autovacuum, and every status change of a
root rewrites its 1,000 dependents' rows: the benchmark vacuums before timing and every other
round, about as often as autovacuum's default threshold would. Without it, dead rows pile up
and the figures drift upwards from run to run.

Targets [L2, F5]: every single change (a learned chat's purge included) p95 ≤ 250 ms; no import
batch holds the lock longer than 1 s; no reader waits longer than 1 s.
"""

import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from unittest import mock

from django.db import connection, transaction
from django.db.models import F

from bench import pool as bench_pool
from chats.services import chat_create, turn_end, turn_start
from memory import lock
from memory.access import Reader, audience_allowed, visible_ids
from memory.forgetting import entry_forget, pool_purge
from memory.learned import observation_create_in
from memory.models import Change, Entry, Pool
from memory.services import (
    ImportedEntry,
    ItemEvidence,
    entries_import,
    entry_remember,
    entry_set_status_in,
    pool_change,
)
from memorybot.models import Enrichment, EnrichmentEntry, ModelCall, ModelCallEntry
from memorybot.purge import memory_purge
from openbot import ids
from openbot.access import Caller
from openbot.fields import readable_values
from openbot.models import Bot

DEPENDENTS = 1_000
FAN_OUTS = 5
CHANGE_TARGET_MS = 250.0
IMPORT_TARGET_MS = 1_000.0
WAIT_TARGET_MS = 1_000.0
FLOOR = "floor: version update"
# Rounds of `measure` between two vacuums of the entry table (see `vacuum_entries`).
VACUUM_EVERY = 2


@dataclass
class Holds:
    """Exclusive holds of the lock in ms, by the kind of change being timed."""

    kind: str = "untimed"
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Time every exclusive hold of this thread from the grant until the commit."""
        real = lock._take

        def take(pool_id: str, *, exclusive: bool) -> None:
            real(pool_id, exclusive=exclusive)
            if exclusive:
                kind, granted = self.kind, time.perf_counter()
                transaction.on_commit(
                    lambda: self.samples[kind].append((time.perf_counter() - granted) * 1000)
                )

        with mock.patch.object(lock, "_take", take):
            yield

    def run(self, kind: str, call: Callable[..., object], *args: object, **kwargs: object) -> None:
        self.kind = kind
        try:
            call(*args, **kwargs)
        finally:
            self.kind = "untimed"


@dataclass
class Waits:
    """What the reader thread saw: its waits for the shared lock in ms, and errors."""

    waits: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def read_loop(waits: Waits, bot: Bot, person_id: str, organization_id: str, entry_id: str) -> None:
    try:
        while not waits.stop.is_set():
            reader = Reader.person(bot=bot, person_id=person_id, organization_id=organization_id)
            started = time.perf_counter()
            with lock.pool_read(bot.id):
                granted = time.perf_counter()
                reader = reader.as_of_now()
                shown = visible_ids(
                    pool_id=bot.id, reader=reader, ids=[entry_id], active_only=False
                )
                readable_values(Entry.objects.filter(id__in=shown), "id", "content")
            waits.waits.append((granted - started) * 1000)
            time.sleep(0.005)
    except BaseException as error:  # reported by the benchmark, not lost in the thread
        waits.errors.append(error)
    finally:
        connection.close()


# --- The pool and what each run adds to it --------------------------------------------------


def lock_pool(world: bench_pool.World, *, size: int, reuse: bool) -> Bot:
    name = f"bench-lock-{size}"
    bot = Bot.objects.filter(organization=world.organization, name=name).first()
    if reuse and bot is not None and Entry.objects.filter(bot=bot).count() >= size:
        print(f"reused the {size:,}-entry pool {name}")
        return bot
    if bot is not None:
        # Ids only: deleting entries never decrypts their content.
        Entry.objects.filter(bot=bot).only("id").delete()
        bot.delete()
    built = bench_pool.pool_build(world, size=size, name=name)
    print(f"built the {size:,}-entry pool {name} in {built.build_seconds:.1f} s")
    return built.bot


@dataclass
class Added:
    """The entries one run adds: a chain, fan-outs, and whose they are."""

    person_id: str
    channel_id: str
    chain: list[str]
    chain_chat: str
    fan_outs: list[tuple[str, str]]  # (root, chat)
    learned: list[tuple[int, str]] = field(default_factory=list)  # (entries, chat)


def add_graphs(world: bench_pool.World, bot: Bot) -> Added:
    """A private fact of one person with a 1,000-deep chain of observations over it, and group
    facts of one channel with 1,000 observations over each; observations carry the
    `from:`/`org:`/`chat:`/`channel:` tags of their sources, as learning writes them [W7]."""
    organization_id = world.organization.id
    person = world.typical
    channel_id = world.channels_of[person.id][0]
    chain_chat = ids.new_id("chat")
    inherited = [f"from:{person.id}", f"org:{organization_id}", f"chat:{chain_chat}"]
    root = _imported(
        Entry.Layer.FACT,
        [*inherited, f"for:person:{person.id}"],
        source_items=[(chain_chat, 1)],
        evidence=[ItemEvidence(chain_chat, 1, f"person:{person.id}", organization_id)],
    )
    chain = [root]
    for _ in range(DEPENDENTS):
        chain.append(
            _imported(
                Entry.Layer.OBSERVATION,
                [*inherited, f"for:person:{person.id}"],
                source_entries=[chain[-1].id],
            )
        )
    entries_import(pool_id=bot.id, entries=chain)
    speakers = world.members_of[channel_id][:2]
    fan_outs = []
    for _ in range(FAN_OUTS):
        chat = ids.new_id("chat")
        group = [f"from:{speaker}" for speaker in speakers] + [
            f"org:{organization_id}",
            f"chat:{chat}",
            f"channel:{channel_id}",
            f"for:channel:{channel_id}",
        ]
        fact = _imported(
            Entry.Layer.FACT,
            group,
            source_items=[(chat, 1)],
            evidence=[ItemEvidence(chat, 1, f"channel:{channel_id}", organization_id)],
        )
        observations = [
            _imported(Entry.Layer.OBSERVATION, group, source_entries=[fact.id])
            for _ in range(DEPENDENTS)
        ]
        entries_import(pool_id=bot.id, entries=[fact, *observations])
        fan_outs.append((fact.id, chat))
    return Added(
        person_id=person.id,
        channel_id=channel_id,
        chain=[entry.id for entry in chain],
        chain_chat=chain_chat,
        fan_outs=fan_outs,
    )


def _imported(
    layer: str,
    tags: list[str],
    *,
    source_items: list[tuple[str, int]] | None = None,
    source_entries: list[str] | None = None,
    evidence: list[ItemEvidence] | None = None,
) -> ImportedEntry:
    return ImportedEntry(
        id=ids.new_id("mem"),
        layer=layer,
        content="a conclusion the benchmark drew from what came before it",
        tags=tags,
        source_items=source_items or [],
        source_entries=source_entries or [],
        evidence=evidence or [],
        confidence=0.7 if layer == Entry.Layer.OBSERVATION else None,
    )


# Chats learned through turns, by their count of entries: the purges of [F5].
LEARNED_CHATS = (400, 1_000)
# What a turn's calls carried, as the memory bot's steps do: the enrichment the newest entries
# that fit its context, the learning step its context of up to 300 valid entries [W5].
ENRICHMENT_CARRIES = 40
LEARNING_CARRIES = 300


def add_learned_chat(world: bench_pool.World, bot: Bot, *, turns: int) -> str:
    """A private chat of one person with `turns` turns, each of which learned one fact, and
    the memory bot's records of them as turns leave them [P4]: per turn an enrichment call
    and an enrichment made from the chat's newest facts, a confide call, and a learning call
    that carried the facts before it and the one it created. The chat's id."""
    organization = world.organization
    person = world.people[len(world.people) // 2]
    chat = chat_create(
        caller=Caller(person=person, organization=organization),
        bot_id=bot.id,
        channel_id=None,
        test=False,
    )
    said = []
    for _ in range(turns):
        turn = turn_start(chat=chat, person=person, text="something worth keeping, said")
        turn_end(turn=turn)
        said.append(turn)
    tags = [f"from:{person.id}", f"for:person:{person.id}", f"org:{organization.id}"]
    facts = [
        _imported(
            Entry.Layer.FACT,
            [*tags, f"chat:{chat.id}"],
            source_items=[(chat.id, turn.input_seq)],
            evidence=[
                ItemEvidence(chat.id, turn.input_seq, f"person:{person.id}", organization.id)
            ],
        )
        for turn in said
    ]
    entries_import(pool_id=bot.id, entries=facts)
    purposes = (ModelCall.Purpose.ENRICHMENT, ModelCall.Purpose.CONFIDE, ModelCall.Purpose.LEARNING)
    calls = ModelCall.objects.bulk_create(
        ModelCall(
            organization=organization,
            bot=bot,
            purpose=purpose,
            model="bench:model",
            request="what the memory bot was shown",
            result="what it answered",
            status=ModelCall.Status.OK,
            chat_id=chat.id,
        )
        for _ in said
        for purpose in purposes
    )
    ids = [fact.id for fact in facts]
    carried, enrichments = [], []
    for n, turn in enumerate(said):
        enrichment_call, _, learning_call = calls[3 * n : 3 * n + 3]
        shown = ids[max(0, n - ENRICHMENT_CARRIES) : n]
        carried += [ModelCallEntry(call=enrichment_call, entry_id=entry_id) for entry_id in shown]
        carried += [
            ModelCallEntry(call=learning_call, entry_id=entry_id)
            for entry_id in ids[max(0, n + 1 - LEARNING_CARRIES) : n + 1]
        ]
        if shown:
            enrichments.append(
                (
                    Enrichment(chat=chat, turn=turn, text="the input, rewritten", original="it"),
                    shown,
                )
            )
    ModelCallEntry.objects.bulk_create(carried, batch_size=5_000)
    Enrichment.objects.bulk_create([enrichment for enrichment, _ in enrichments])
    EnrichmentEntry.objects.bulk_create(
        [
            EnrichmentEntry(enrichment=enrichment, entry_id=entry_id)
            for enrichment, shown in enrichments
            for entry_id in shown
        ],
        batch_size=5_000,
    )
    return chat.id


# --- The changes ----------------------------------------------------------------------------


def set_status(pool_id: str, entry_id: str, status: str) -> None:
    with pool_change(pool_id=pool_id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=entry_id, status=status)


def floor(pool_id: str) -> None:
    with lock.pool_write(pool_id):
        Pool.objects.filter(bot_id=pool_id).update(version=F("version"))


def learning_apply(bot: Bot, reader: Reader, source_id: str, audience: str) -> None:
    """What learning's apply does for one new observation [W7, V5]: the source is checked
    against the run's readers and the audience against the sources, then it is written."""
    with pool_change(pool_id=bot.id, by=Change.By.MEMORY_BOT) as change:
        reader = reader.as_of_now()
        assert visible_ids(pool_id=bot.id, reader=reader, ids=[source_id], active_only=True)
        assert audience_allowed(source_ids=[source_id], audience=audience)
        observation_create_in(
            change,
            source_ids=[source_id],
            audience=[audience],
            content="a new conclusion over the deepest entry of the chain",
            confidence=0.6,
        )


def measure(world: bench_pool.World, bot: Bot, added: Added, holds: Holds, runs: int) -> None:
    pool_id, organization_id = bot.id, world.organization.id
    person = Reader.person(bot=bot, person_id=added.person_id, organization_id=organization_id)
    root, tail = added.chain[0], added.chain[-1]
    fan_root = added.fan_outs[0][0]
    active, invalidated, retracted = (
        Entry.Status.ACTIVE,
        Entry.Status.INVALIDATED,
        Entry.Status.RETRACTED,
    )
    for run in range(runs):
        if run % VACUUM_EVERY == 0:
            vacuum_entries()
        holds.run(FLOOR, floor, pool_id)
        holds.run(
            "Remember",
            entry_remember,
            pool_id=pool_id,
            person_id=added.person_id,
            organization_id=organization_id,
            content="remember that the benchmark ran",
            topics=[],
        )
        for target, where in ((root, "chain root"), (fan_root, "fan-out root")):
            for status in (invalidated, retracted):
                holds.run(f"{status} ({where})", set_status, pool_id, target, status)
                holds.run(f"re-activate ({where})", set_status, pool_id, target, active)
        holds.run(
            "Forget, retracts (chain root)",
            entry_forget,
            pool_id=pool_id,
            reader=person,
            entry_id=root,
        )
        holds.run("re-activate (chain root)", set_status, pool_id, root, active)
    # Forget by one of several people behind an entry excludes them: once per member.
    members = [member for member in world.members_of[added.channel_id] if member != added.person_id]
    for member in members[:runs]:
        reader = Reader.person(bot=bot, person_id=member, organization_id=organization_id)
        holds.run(
            "Forget, excludes (fan-out root)",
            entry_forget,
            pool_id=pool_id,
            reader=reader,
            entry_id=fan_root,
        )
    audience = f"for:person:{added.person_id}"
    vacuum_entries()
    for _ in range(runs):
        holds.run("learning apply (over chain)", learning_apply, bot, person, tail, audience)
    for _, chat in added.fan_outs:
        holds.run(f"purge (fact + {DEPENDENTS:,})", pool_purge, pool_id=pool_id, tag=f"chat:{chat}")
    holds.run(
        f"purge ({DEPENDENTS:,}-deep chain)",
        pool_purge,
        pool_id=pool_id,
        tag=f"chat:{added.chain_chat}",
    )
    for entries, chat in added.learned:
        started = time.perf_counter()
        kind = f"purge ({entries:,}-entry learned chat)"
        holds.run(kind, memory_purge, pool_id=pool_id, tag=f"chat:{chat}")
        print(
            f"{kind}: {time.perf_counter() - started:.2f} s in all, "
            f"{holds.samples[kind][-1]:.1f} ms of it under the lock"
        )


# --- The run --------------------------------------------------------------------------------


def vacuum_entries() -> None:
    """What autovacuum does at its default threshold (a fifth of a table dead): each round
    of `measure` rewrites about 10,000 entry rows, and the entry table holds 100,000."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM {Entry._meta.db_table}")


def tidy() -> None:
    """What autovacuum does in production (it is off on the development machine's PostgreSQL):
    earlier runs' dead rows go, so that runs stay comparable. The checkpoint writes the
    imports out now rather than while holds are timed."""
    if connection.vendor != "postgresql":
        return
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")
    print(f"vacuumed and checkpointed in {time.perf_counter() - started:.1f} s")


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    if len(samples) == 1:
        return samples[0], samples[0], samples[0]
    p95 = statistics.quantiles(samples, n=100, method="inclusive")[94]
    return statistics.median(samples), p95, max(samples)


def run(*, size: int, runs: int, reuse: bool) -> bool:
    """Build (or reuse) the pool, time every kind of change and the reader; print the figures;
    whether every target is met."""
    world = bench_pool.world_find() if reuse else None
    if world is None:
        bench_pool.world_remove()
        world = bench_pool.world_build()
        print(f"built the world ({bench_pool.PEOPLE} people, {bench_pool.CHANNELS} channels)")
    holds = Holds()
    with holds.timing():
        holds.kind = "import batch"
        bot = lock_pool(world, size=size, reuse=reuse)
        started = time.perf_counter()
        added = add_graphs(world, bot)
        holds.kind = "untimed"
        print(
            f"imported a {DEPENDENTS:,}-deep chain and {FAN_OUTS} fan-outs of {DEPENDENTS:,} in "
            f"{time.perf_counter() - started:.1f} s"
        )
        started = time.perf_counter()
        added.learned = [
            (turns, add_learned_chat(world, bot, turns=turns)) for turns in LEARNED_CHATS
        ]
        print(
            f"learned chats of {', '.join(f'{n:,}' for n in LEARNED_CHATS)} turns in "
            f"{time.perf_counter() - started:.1f} s"
        )
        tidy()
        # The reader reads a pinned entry of its own, the only one it looks at.
        reader_id = world.people[-1].id
        seen = entry_remember(
            pool_id=bot.id,
            person_id=reader_id,
            organization_id=world.organization.id,
            content="the reader's note",
            topics=[],
        ).id
        waits = Waits()
        thread = threading.Thread(
            target=read_loop, args=(waits, bot, reader_id, world.organization.id, seen)
        )
        thread.start()
        time.sleep(1.0)
        alone = list(waits.waits)
        try:
            measure(world, bot, added, holds, runs)
        finally:
            waits.stop.set()
            thread.join(timeout=60)
    if waits.errors:
        raise waits.errors[0]
    return report(holds, alone, waits.waits[len(alone) :])


def report(holds: Holds, alone: list[float], waits: list[float]) -> bool:
    floor_p50, floor_p95, _ = percentiles(holds.samples[FLOOR])
    header = (
        f"{'lock held by':<34}{'runs':>5}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}"
        f"{'target':>10} {'met':<4}{'floor p50/p95 ms':>18}"
    )
    lines = [header, "-" * len(header)]
    met = True
    for kind, samples in holds.samples.items():
        if kind == "untimed":
            continue
        p50, p95, top = percentiles(samples)
        if kind == "import batch":
            target, ok = f"max≤{IMPORT_TARGET_MS:g}", top <= IMPORT_TARGET_MS
        elif kind == FLOOR:
            target, ok = "-", True
        else:
            target, ok = f"p95≤{CHANGE_TARGET_MS:g}", p95 <= CHANGE_TARGET_MS
        met = met and ok
        lines.append(
            f"{kind:<34}{len(samples):>5}{p50:>9.1f}{p95:>9.1f}{top:>9.1f}{target:>10} "
            f"{'yes' if ok else 'NO':<4}{floor_p50:>9.1f}/{floor_p95:<8.1f}"
        )
    p50, p95, top = percentiles(waits)
    alone_p50, alone_p95, _ = percentiles(alone)
    ok = top <= WAIT_TARGET_MS
    lines.append(
        f"{'reader waited for the lock':<34}{len(waits):>5}{p50:>9.1f}{p95:>9.1f}{top:>9.1f}"
        f"{f'max≤{WAIT_TARGET_MS:g}':>10} {'yes' if ok else 'NO':<4}"
        f"{alone_p50:>9.1f}/{alone_p95:<8.1f}"
    )
    print()
    print("\n".join(lines))
    print("(floor of a change: a version update under the lock; of the reader: its wait alone)")
    return met and ok
