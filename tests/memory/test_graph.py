"""[L2] The derived access data is kept with set-based SQL, whatever the depth of the graph.

A status change, Forget, a purge or a new entry issues as many queries over a chain of 80
dependents as over a chain of 2 (a walk in Python would issue more the deeper the chain), and
the access rule still answers as the reference model of the property test does. An import
commits in batches, sources first. On PostgreSQL, a reader reading while the root of a deep
chain is invalidated and re-activated sees one state or the other, never a mix.
"""

import importlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from memory import graph
from memory.access import Reader, visible_entries
from memory.forgetting import entry_forget, pool_purge
from memory.graph import ImportLimits
from memory.models import (
    SCOPE_MANY,
    Change,
    ChangeEntry,
    Closure,
    Entry,
    EntrySource,
    EntryTag,
    EntryTerm,
    Evidence,
)
from memory.selectors import entries_for_reader, pool_version
from memory.services import (
    ImportedEntry,
    ItemEvidence,
    entries_import,
    entry_create_in,
    entry_remember,
    pool_change,
)
from tests.conftest import World
from tests.memory.builders import set_status
from tests.memory.test_access_property import PoolModel, RefEntry, RefReader
from tests.memory.test_search import assert_counts_agree

ACTIVE, INVALIDATED = Entry.Status.ACTIVE, Entry.Status.INVALIDATED
# Deep enough that rewriting the chain's closure (80 × 81 / 2 rows) would take more queries.
SHALLOW, DEEP = 2, 80
# What one change on the root of a chain may cost, at any depth.
MAX_QUERIES = 30


@pytest.fixture
def model(world: World) -> PoolModel:
    """The property test's reference model of the pool: people of org A using the bot."""
    people = {world.actor(name).person.id for name in ("alice", "bob", "carol")}
    return PoolModel(channel_org={}, members={}, bot_users={world.org.id: people})


class Chain:
    """A private fact of alice and observations over it, each over the one before, imported
    through the real service and added to the reference `model`."""

    def __init__(self, world: World, model: PoolModel, depth: int, inherit: bool = True) -> None:
        self.world = world
        self.model = model
        alice, org = world.alice.person.id, world.org.id
        self.ids = [f"mem_chain{depth}x{level}" for level in range(depth + 1)]
        chat = f"chat_chain{depth}"
        private = {f"for:person:{alice}", f"org:{org}"}
        carried = {f"from:{alice}", f"chat:{chat}"} if inherit else set()
        self.model.entries[self.ids[0]] = RefEntry(
            Entry.Layer.FACT,
            ACTIVE,
            private | {f"from:{alice}", f"chat:{chat}"},
            source_items=[(chat, 1)],
            evidence=[(chat, 1, f"person:{alice}", org)],
        )
        for source, entry_id in zip(self.ids, self.ids[1:], strict=False):
            self.model.entries[entry_id] = RefEntry(
                Entry.Layer.OBSERVATION, ACTIVE, private | carried, source_entries=[source]
            )
        entries_import(pool_id=world.bot.id, entries=[self.imported(id_) for id_ in self.ids])

    def imported(self, entry_id: str) -> ImportedEntry:
        ref = self.model.entries[entry_id]
        return ImportedEntry(
            id=entry_id,
            layer=ref.layer,
            content=f"entry {entry_id}",
            tags=sorted(ref.tags),
            source_items=ref.source_items,
            source_entries=ref.source_entries,
            # The model's evidence is (chat, item, rule, organization), ItemEvidence's order.
            evidence=[ItemEvidence(*proof) for proof in ref.evidence],
            confidence=0.5 if ref.layer == Entry.Layer.OBSERVATION else None,
        )

    @property
    def root(self) -> str:
        return self.ids[0]

    def reader(self, name: str) -> tuple[RefReader, Reader]:
        person_id = self.world.actor(name).person.id
        return (
            RefReader(organization=self.world.org.id, person=person_id),
            Reader.person(
                bot=self.world.bot, person_id=person_id, organization_id=self.world.org.id
            ),
        )

    def expected(self, name: str = "alice") -> set[str]:
        return self.model.visible(self.reader(name)[0], active_only=False)

    def assert_agrees(self) -> None:
        """The access rule answers as the reference model, for alice and for bob."""
        for name in ("alice", "bob"):
            ref_reader, reader = self.reader(name)
            for active_only in (False, True):
                shown = visible_entries(
                    pool_id=self.world.bot.id, reader=reader, active_only=active_only
                ).values_list("id", flat=True)
                assert set(shown) == self.model.visible(ref_reader, active_only=active_only)


def queries_of(call: Callable[..., object], *args: Any, **kwargs: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        call(*args, **kwargs)
    return len(queries)


def observe(chain: Chain, source_id: str) -> None:
    """A new observation over `source_id` for alice, written as learning writes it."""
    ref = RefEntry(
        Entry.Layer.OBSERVATION,
        ACTIVE,
        {f"for:person:{chain.world.alice.person.id}", f"org:{chain.world.org.id}"},
        source_entries=[source_id],
    )
    with pool_change(pool_id=chain.world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry = entry_create_in(
            change,
            layer=ref.layer,
            content="a new conclusion",
            tags=sorted(ref.tags),
            source_entries=ref.source_entries,
            confidence=0.5,
        )
    chain.model.entries[entry.id] = ref


@pytest.mark.parametrize("status", [INVALIDATED, Entry.Status.RETRACTED])
def test_a_status_change_of_the_root_costs_the_same_at_any_depth(
    world: World, model: PoolModel, status: str, django_assert_max_num_queries: Any
) -> None:
    """The closure stays as it was: only the dependents' soundness changes."""
    counts = []
    for depth in (SHALLOW, DEEP):
        chain = Chain(world, model, depth)
        root = Entry.objects.get(id=chain.root)
        chain.assert_agrees()
        closure = set(Closure.objects.values_list("id", "entry_id", "ancestor_id"))
        with django_assert_max_num_queries(MAX_QUERIES):
            counts.append(queries_of(set_status, root, status))
        chain.model.entries[chain.root].status = status
        chain.assert_agrees()
        assert set(Closure.objects.values_list("id", "entry_id", "ancestor_id")) == closure
        # Re-activated, every dependent is sound again.
        with django_assert_max_num_queries(MAX_QUERIES):
            counts.append(queries_of(set_status, root, ACTIVE))
        chain.model.entries[chain.root].status = ACTIVE
        chain.assert_agrees()
        assert chain.expected() >= set(chain.ids)
    assert counts[:2] == counts[2:]


def test_forget_that_retracts_the_root_costs_the_same_at_any_depth(
    world: World, model: PoolModel
) -> None:
    counts = []
    for depth in (SHALLOW, DEEP):
        chain = Chain(world, model, depth)
        _, alice = chain.reader("alice")
        counts.append(
            queries_of(entry_forget, pool_id=world.bot.id, reader=alice, entry_id=chain.root)
        )
        chain.model.entries[chain.root].status = Entry.Status.RETRACTED
        chain.assert_agrees()
        assert chain.expected().isdisjoint(chain.ids)
    assert counts[0] == counts[1]


def test_a_new_observation_over_a_deep_chain_costs_the_same_at_any_depth(
    world: World, model: PoolModel, django_assert_max_num_queries: Any
) -> None:
    counts = []
    for depth in (SHALLOW, DEEP):
        chain = Chain(world, model, depth)
        with django_assert_max_num_queries(MAX_QUERIES):
            counts.append(queries_of(observe, chain, chain.ids[-1]))
        chain.assert_agrees()
        assert len(chain.expected()) == len(model.entries)
    assert counts[0] == counts[1]


def test_a_purge_under_a_chain_costs_the_same_at_any_depth(
    world: World, model: PoolModel, django_assert_max_num_queries: Any
) -> None:
    """Observations that do not carry the root's tags stay, hidden: their source is gone."""
    counts = []
    for depth in (SHALLOW, DEEP):
        chain = Chain(world, model, depth, inherit=False)
        tag = f"chat:chat_chain{depth}"
        with django_assert_max_num_queries(MAX_QUERIES):
            counts.append(queries_of(pool_purge, pool_id=world.bot.id, tag=tag))
        del chain.model.entries[chain.root]
        chain.assert_agrees()
        assert Entry.objects.filter(id__in=chain.ids).count() == depth
        assert chain.expected().isdisjoint(chain.ids)
    assert counts[0] == counts[1]


def test_a_purged_chain_leaves_its_closure_rows_until_the_commit_then_they_go(
    world: World, model: PoolModel, django_capture_on_commit_callbacks: Any
) -> None:
    """[L2] The closure rows of a purged chain (half a million at depth 1,000) are not
    deleted under the lock but after the commit; until then nothing reads them. An id that
    exists again by then (an import brought it back) keeps the rows its import wrote."""
    chain = Chain(world, model, DEEP)
    root = model.entries[chain.root]
    with django_capture_on_commit_callbacks() as after_commit:
        pool_purge(pool_id=world.bot.id, tag=f"chat:chat_chain{DEEP}")
    for entry_id in chain.ids:
        del model.entries[entry_id]
    rows = Closure.objects.filter(entry_id__in=chain.ids)
    assert rows.count() == (DEEP + 1) * (DEEP + 2) // 2
    chain.assert_agrees()
    model.entries[chain.root] = root
    entries_import(pool_id=world.bot.id, entries=[chain.imported(chain.root)])
    chain.assert_agrees()

    for callback in after_commit:
        callback()

    assert set(rows.values_list("entry_id", "ancestor_id")) == {(chain.root, chain.root)}
    chain.assert_agrees()


@pytest.mark.parametrize("batch", [7, graph.DELETE_BATCH])
def test_a_purge_in_many_batches_deletes_every_row_of_every_purged_entry(
    world: World, model: PoolModel, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """[A4, L2] A purge deletes by lists of ids, a batch at a time: none is left behind at a
    batch's edge, and the log keeps no index row of a purged entry."""
    monkeypatch.setattr(graph, "DELETE_BATCH", batch)
    chain = Chain(world, model, DEEP)
    hanging_kinds = (EntrySource, Evidence, EntryTag, EntryTerm, ChangeEntry)
    for hanging in hanging_kinds:
        assert hanging.objects.filter(entry_id__in=chain.ids).exists(), hanging
    pool_purge(pool_id=world.bot.id, tag=f"chat:chat_chain{DEEP}")
    for hanging in hanging_kinds:
        assert not hanging.objects.filter(entry_id__in=chain.ids).exists(), hanging
    assert not Entry.objects.filter(id__in=chain.ids).exists()
    assert_counts_agree(world.bot)


def test_an_import_commits_in_batches_sources_first(world: World, model: PoolModel) -> None:
    """[L2] Given last-first, a chain still commits sources first; a cycle stays in one batch
    and stays hidden [V4](e); so does an entry naming one that is never imported."""
    chain_depth, limit = 30, 7
    chain = Chain(world, model, 0)
    alice, org = world.alice.person.id, world.org.id
    private = {f"for:person:{alice}", f"org:{org}"}
    links = [chain.root] + [f"mem_link{n}" for n in range(chain_depth)]
    cycle = ["mem_cycle0", "mem_cycle1", "mem_cycle2"]
    named = {link: [source] for source, link in zip(links, links[1:], strict=False)}
    named |= {member: [cycle[(n + 1) % 3]] for n, member in enumerate(cycle)}
    named |= {"mem_orphan": ["mem_never_imported"], "mem_over_cycle": [cycle[0], links[-1]]}
    for entry_id, sources in named.items():
        chain.model.entries[entry_id] = RefEntry(
            Entry.Layer.OBSERVATION, ACTIVE, set(private), source_entries=sources
        )
    before = Change.objects.filter(bot_id=world.bot.id).count()

    entries_import(
        pool_id=world.bot.id,
        entries=[chain.imported(entry_id) for entry_id in reversed(named)],
        limits=ImportLimits(entries=limit, closure_rows=10_000),
    )

    changes = list(Change.objects.filter(bot_id=world.bot.id).order_by("version")[before:])
    assert len(changes) >= len(named) // limit
    assert {change.by for change in changes} == {Change.By.PROMOTION}
    batch_of = {
        entry_id: version
        for version, entry_id in ChangeEntry.objects.filter(change__in=changes).values_list(
            "change__version", "entry_id"
        )
    }
    assert set(batch_of) == set(named)
    for entry_id, sources in named.items():
        assert all(batch_of.get(source, 0) <= batch_of[entry_id] for source in sources)
    assert len({batch_of[member] for member in cycle}) == 1
    chain.assert_agrees()
    assert chain.expected() == {*links}


# --- PostgreSQL: a reader during the change ---------------------------------------------


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="advisory locks and parallel readers need PG"
)
@pytest.mark.django_db(transaction=True)
def test_a_reader_sees_a_deep_chain_before_or_after_its_root_changes(
    world: World, model: PoolModel
) -> None:
    chain = Chain(world, model, 300)
    root = Entry.objects.get(id=chain.root)
    _, alice = chain.reader("alice")
    everything, root_only = chain.expected(), {chain.root}
    # The state of each committed version, and every read: (version, ids it showed).
    states: dict[int, set[str]] = {}
    reads: list[tuple[int, set[str]]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read_loop() -> None:
        try:
            while not done.is_set():
                entries, version = entries_for_reader(pool_id=world.bot.id, reader=alice, tags=[])
                reads.append((version, {entry["id"] for entry in entries}))
        except BaseException as error:  # reported by the test, not lost in the thread
            errors.append(error)
        finally:
            connections.close_all()

    states[pool_version(world.bot.id)] = everything
    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for _ in range(3):
            for status, state in ((INVALIDATED, root_only), (ACTIVE, everything)):
                time.sleep(0.05)
                set_status(root, status)
                chain.model.entries[chain.root].status = status
                assert chain.expected() == state
                states[pool_version(world.bot.id)] = state
        time.sleep(0.05)
    finally:
        done.set()
        reader.join(timeout=60)
    assert not reader.is_alive()
    assert errors == []
    assert reads
    assert [(version, ids) for version, ids in reads if states.get(version) != ids] == []
    assert {frozenset(ids) for _, ids in reads} == {frozenset(everything), frozenset(root_only)}
    chain.assert_agrees()


@pytest.mark.parametrize(
    ("layer", "items", "proven", "intact"),
    [
        (Entry.Layer.PINNED, [], True, True),
        (Entry.Layer.PINNED, [], False, False),
        (Entry.Layer.FACT, [("chat_new", 1), ("chat_new", 2)], True, True),
        (Entry.Layer.FACT, [("chat_new", 1), ("chat_new", 2)], False, False),
        (Entry.Layer.FACT, [], True, False),
        (Entry.Layer.OBSERVATION, [], True, False),
    ],
)
def test_a_new_entry_without_named_sources_gets_what_a_full_refresh_gives_it(
    world: World, layer: str, items: list[tuple[str, int]], proven: bool, intact: bool
) -> None:
    """[Q4] A new entry that names no entry takes `graph.refresh_new`'s two statements; its
    closure, intactness, blockers and soundness are what the full refresh computes."""
    rule, org = f"person:{world.alice.person.id}", world.org.id
    evidence = [ItemEvidence(chat, seq, rule, org) for chat, seq in items or [("", 0)]]
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry = entry_create_in(
            change,
            layer=layer,
            content="new",
            tags=[f"for:person:{world.alice.person.id}"],
            source_items=items,
            # A fact whose second item is not proven is not intact [V4](d).
            evidence=evidence if proven else evidence[:1] if items else [],
        )

    def derived() -> tuple[object, ...]:
        row = Entry.objects.values_list("intact", "blockers", "sound").get(id=entry.id)
        closure = set(Closure.objects.filter(entry_id=entry.id).values_list("ancestor_id"))
        return (*row, closure)

    new = derived()
    assert new == (intact, 0 if intact else 1, intact, {(entry.id,)})
    graph.refresh(pool_id=world.bot.id, changed_ids=[entry.id])
    assert derived() == new


def _derived_columns() -> dict[str, tuple[bool, str, str]]:
    rows = Entry.objects.values_list("id", "depends", "org_scope", "rule_scope")
    return {entry_id: (depends, org, rule) for entry_id, depends, org, rule in rows}


def test_what_is_written_with_an_entry_is_what_its_rows_say(world: World) -> None:
    """[Q4, V4](b, d, e) `depends`, `org_scope` and `rule_scope` as written with each entry (by
    Remember, learning's changes, an import) are what the migration derives from its sources,
    tags and evidence, and a purge of a source leaves them right: the access rule may read
    them in the row."""
    alice, carol = world.alice.person.id, world.carol.person.id
    org, other = world.org.id, world.other_org.id
    pinned = entry_remember(
        pool_id=world.bot.id, person_id=alice, organization_id=org, content="p", topics=[]
    )
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        mixed = entry_create_in(
            change,
            layer=Entry.Layer.FACT,
            content="from two people",
            tags=[f"org:{org}", f"for:person:{alice}", "chat:chat_1"],
            source_items=[("chat_1", 1), ("chat_1", 2)],
            evidence=[
                ItemEvidence("chat_1", 1, f"person:{alice}", org),
                ItemEvidence("chat_1", 2, f"person:{carol}", org),
            ],
        )
        over_both = entry_create_in(
            change,
            layer=Entry.Layer.OBSERVATION,
            content="over both",
            tags=[f"org:{org}", f"for:person:{alice}"],
            source_entries=[pinned.id, mixed.id],
        )
    entries_import(
        pool_id=world.bot.id,
        entries=[
            ImportedEntry(id="mem_two_orgs", layer="pinned", content="t", tags=[f"org:{org}",
                f"org:{other}"], evidence=[ItemEvidence("", 0, f"person:{alice}", other)]),
            ImportedEntry(id="mem_no_org", layer="pinned", content="n", tags=[], evidence=[]),
            ImportedEntry(id="mem_empty_org", layer="pinned", content="e", tags=["org:"]),
            ImportedEntry(id="mem_over_one", layer="observation", content="o",
                tags=[f"org:{org}"], source_entries=["mem_no_org"]),
        ],
    )  # fmt: skip
    pool_purge(pool_id=world.bot.id, tag=f"from:{alice}")  # the pinned entry: a source goes
    written = _derived_columns()
    assert written[mixed.id] == (False, org, SCOPE_MANY)
    assert written[over_both.id] == (True, org, "")  # one of its sources is left
    assert written["mem_two_orgs"] == (False, SCOPE_MANY, f"{other} person:{alice}")
    assert written["mem_no_org"] == (False, "", "")
    # An empty organization cannot be told from none: the rule reads the tags themselves.
    assert written["mem_empty_org"] == (False, SCOPE_MANY, "")
    assert written["mem_over_one"] == (True, org, "")
    migration = importlib.import_module("memory.migrations.0007_access_in_the_row")
    Entry.objects.update(depends=True, org_scope=SCOPE_MANY, rule_scope=SCOPE_MANY)
    with connection.cursor() as cursor:
        cursor.execute(migration.DERIVE)
    assert _derived_columns() == written
