"""Derived access data, kept on write so reads never walk graphs (SPEC appendix, [L2]).

- `Closure`: the entry and every existing entry it depends on, through source references.
- `Entry.intact`: the entry's own part of soundness — it carries evidence, every source entry
  it names exists in the pool, and it is on no cycle of source references.
- `Entry.blockers`: how many entries of its closure keep it from being sound — itself if not
  intact, another entry if not intact or not active; `Entry.sound` is `blockers == 0`.

A status change leaves the closure as it is: the entry blocks its dependents or stops blocking
them, so their counts move by one in a single set-based update, however many there are.
Structural changes (new entries, imports, purges) recompute the closure of the entries they
touch and of those depending on them with one recursive query, then count again.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Exists, OuterRef

from memory.index import terms_delete
from memory.models import (
    Closure,
    Entry,
    EntrySource,
    EntryTag,
    EntryVector,
    Evidence,
    Exclusion,
)
from openbot import compiled

_ENTRY = Entry._meta.db_table
_SOURCE = EntrySource._meta.db_table
_CLOSURE = Closure._meta.db_table
_EVIDENCE = Evidence._meta.db_table
_ACTIVE = Entry.Status.ACTIVE
# `closure_discard`: entries whose closure rows one statement deletes (up to 1,000 rows each).
DISCARD_ENTRIES = 20
# `entries_delete`: ids per statement (SQLite binds at most 999 values in older builds).
DELETE_BATCH = 500


def _intact_sql() -> str:
    """SQL: the own part of soundness of the entry-table row being updated; cycles
    are read from the closure of its sources."""
    row = _ENTRY
    named = (
        f"SELECT 1 FROM {_SOURCE} s WHERE s.entry_id = {row}.id AND s.source_entry_id IS NOT NULL"
    )
    items = f"SELECT 1 FROM {_SOURCE} s WHERE s.entry_id = {row}.id AND s.source_entry_id IS NULL"
    proven = (
        f"SELECT 1 FROM {_EVIDENCE} v WHERE v.entry_id = s.entry_id"
        " AND v.chat_id = s.chat_id AND v.item_seq = s.item_seq"
    )
    # Evidence: a pinned entry its own rule; a fact one rule per source item; an observation
    # the evidence of its sources.
    carries_evidence = (
        f"CASE {row}.layer"
        f" WHEN '{Entry.Layer.PINNED}'"
        f" THEN EXISTS (SELECT 1 FROM {_EVIDENCE} v WHERE v.entry_id = {row}.id)"
        f" WHEN '{Entry.Layer.FACT}'"
        f" THEN EXISTS ({items}) AND NOT EXISTS ({items} AND NOT EXISTS ({proven}))"
        f" WHEN '{Entry.Layer.OBSERVATION}' THEN EXISTS ({named})"
        " ELSE FALSE END"
    )
    # A named source that is not in this pool is missing; one that depends on the
    # entry closes a cycle.
    present = f"SELECT 1 FROM {row} x WHERE x.id = s.source_entry_id AND x.bot_id = {row}.bot_id"
    cycle = (
        f"SELECT 1 FROM {_CLOSURE} c"
        f" WHERE c.entry_id = s.source_entry_id AND c.ancestor_id = {row}.id"
    )
    return (
        f"({carries_evidence})"
        f" AND NOT EXISTS ({named} AND (NOT EXISTS ({present}) OR EXISTS ({cycle})))"
    )


def _blockers_sql() -> str:
    """SQL: the closure rows of the entry-table row being updated whose ancestor keeps it from
    being sound; an ancestor that does not exist counts too, so the count never fails open."""
    row = _ENTRY
    return (
        f"SELECT COUNT(*) FROM {_CLOSURE} c WHERE c.entry_id = {row}.id AND NOT EXISTS ("
        f"SELECT 1 FROM {row} a WHERE a.id = c.ancestor_id AND a.intact"
        f" AND (a.status = '{_ACTIVE}' OR a.id = {row}.id))"
    )


def status_changing(*, pool_id: str, entry_id: str, status: str) -> None:
    """Before `entry_id` takes `status`: if it goes from active to not, or back, its
    dependents' counts move by one. An entry that is not intact blocks them either way."""
    rows = Entry.objects.filter(bot_id=pool_id, id=entry_id).values_list("status", "intact")
    before = rows.first()
    if before is None or not before[1] or (before[0] == _ACTIVE) == (status == _ACTIVE):
        return
    step = -1 if status == _ACTIVE else 1
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_ENTRY} SET blockers = blockers + %s, sound = (blockers + %s = 0)"
            f" WHERE id IN (SELECT entry_id FROM {_CLOSURE} WHERE ancestor_id = %s)"
            " AND id <> %s",
            [step, step, entry_id, entry_id],
        )


def dependents(ids: Iterable[str]) -> set[str]:
    """Entries outside `ids` that depend on one of them, or name one as a source (even one
    that is missing).

    A path into `ids` from outside enters through an entry outside that names one inside, so
    only those entries' dependents are read, never the closure among `ids` themselves (a
    purged 1,000-deep chain has half a million rows of it).
    """
    ids = set(ids)
    naming = set(
        EntrySource.objects.filter(source_entry_id__in=ids)
        .exclude(entry_id__in=ids)
        .values_list("entry_id", flat=True)
    )
    return naming | set(
        Closure.objects.filter(ancestor_id__in=naming).values_list("entry_id", flat=True)
    )


def refresh(*, pool_id: str, changed_ids: Iterable[str]) -> None:
    """Recompute the derived data of `changed_ids` and of everything depending on them.

    The closure of an entry is itself, the entries it reaches through references among the
    affected entries, and the (unchanged) closures of the entries outside them that it names;
    no entry outside depends on an affected one, so those closures are final.
    """
    changed = set(changed_ids)
    candidates = changed | dependents(changed)
    affected = sorted(
        Entry.objects.filter(bot_id=pool_id, id__in=candidates).values_list("id", flat=True)
    )
    if not affected:
        return
    Closure.objects.filter(entry_id__in=affected).delete()
    marks = ", ".join(["%s"] * len(affected))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE
            edge (entry_id, source_id) AS (
                SELECT s.entry_id, s.source_entry_id FROM {_SOURCE} s
                JOIN {_ENTRY} e ON e.id = s.source_entry_id AND e.bot_id = %s
                WHERE s.entry_id IN ({marks})
            ),
            reach (entry_id, ancestor_id) AS (
                SELECT id, id FROM {_ENTRY} WHERE bot_id = %s AND id IN ({marks})
                UNION
                SELECT reach.entry_id, edge.source_id
                FROM reach JOIN edge ON edge.entry_id = reach.ancestor_id
            )
            INSERT INTO {_CLOSURE} (entry_id, ancestor_id)
            SELECT entry_id, ancestor_id FROM reach
            UNION
            SELECT reach.entry_id, c.ancestor_id
            FROM reach
            JOIN edge ON edge.entry_id = reach.ancestor_id
            JOIN {_CLOSURE} c ON c.entry_id = edge.source_id
            """,
            [pool_id, *affected, pool_id, *affected],
        )
        where = f"WHERE bot_id = %s AND id IN ({marks})"
        cursor.execute(
            f"UPDATE {_ENTRY} SET intact = {_intact_sql()} {where}", [pool_id, *affected]
        )
        # Counted once (as `sound = ((count) = 0)` in the same UPDATE, it is counted twice).
        cursor.execute(
            f"UPDATE {_ENTRY} SET blockers = ({_blockers_sql()}) {where}", [pool_id, *affected]
        )
        cursor.execute(f"UPDATE {_ENTRY} SET sound = (blockers = 0) {where}", [pool_id, *affected])


def refresh_new(*, pool_id: str, entry_id: str) -> None:
    """`refresh` of a new entry that names no entry as a source, in two statements: its
    closure is itself, and nothing depends on it (its id was just made), so it blocks itself
    exactly when it is not intact."""
    Closure.objects.create(entry_id=entry_id, ancestor_id=entry_id)
    # The intact check once (written out three times, PostgreSQL spent far longer planning it
    # than running it), in a statement prepared once per connection.
    with compiled.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_ENTRY} SET (intact, blockers, sound) ="
            " (SELECT ok, CASE WHEN ok THEN 0 ELSE 1 END, ok"
            f" FROM (SELECT {_intact_sql()} AS ok) AS checked)"
            " WHERE bot_id = %s AND id = %s",
            [pool_id, entry_id],
        )


def id_batches(ids: list[str]) -> Iterator[list[str]]:
    """`ids` in lists of at most `DELETE_BATCH`, each for one statement."""
    for start in range(0, len(ids), DELETE_BATCH):
        yield ids[start : start + DELETE_BATCH]


def entries_delete(*, pool_id: str, entry_ids: list[str]) -> None:
    """Delete the pool's `entry_ids` and the rows that hang on them, one statement per
    table and batch of ids: no row is loaded into Python (Django's delete collector loads the
    entries and deletes them a hundred at a time), no content is read.

    By ids, not by a subquery on the purged tag: PostgreSQL joins a subquery of a thousand ids
    by scanning the whole term and tag tables, and looks a list up in their indexes, so a
    purge of many entries holds the pool's lock for less time.

    Their closure rows stay, for `closure_discard` after the commit: nothing reads the closure
    of an entry that does not exist, and a purged 1,000-deep chain has half a million rows.
    """
    for batch in id_batches(entry_ids):
        # Models nothing refers to: `delete()` is one DELETE … WHERE entry_id IN (…).
        for model in (EntrySource, Evidence, Exclusion, EntryTag, EntryVector):
            model.objects.filter(entry_id__in=batch).delete()
        terms_delete(pool_id=pool_id, entry_ids=batch)
        # Entry is referred to (by the rows just deleted): the collector would load it, so the
        # statement is issued without it.
        Entry.objects.filter(bot_id=pool_id, id__in=batch)._raw_delete(connection.alias)


def closure_discard(entry_ids: list[str]) -> None:
    """Delete the closure rows of deleted entries, a few entries' rows per statement
    (each its own transaction), none under the pool's lock. Only rows whose entry does not
    exist: an import may have brought an id back meanwhile, and its refresh wrote its rows."""
    for start in range(0, len(entry_ids), DISCARD_ENTRIES):
        Closure.objects.filter(entry_id__in=entry_ids[start : start + DISCARD_ENTRIES]).exclude(
            Exists(Entry.objects.filter(id=OuterRef("entry_id")))
        ).delete()


@dataclass(frozen=True)
class ImportLimits:
    """What one committed batch of an import may hold: entries, and closure rows."""

    entries: int = 100
    closure_rows: int = 5_000


def import_batches(*, sources: dict[str, list[str]], limits: ImportLimits) -> list[list[str]]:
    """The batches an import commits in, in order: every entry after the imported entries
    it names, each cycle within one batch, within `limits` (a cycle larger than them alone).

    So a batch never names an entry of a later batch: until that batch commits, an entry
    naming it names a missing source and stays hidden, and a reader between two
    batches sees a pool the access rule holds for. Closure sizes are estimated from above.
    """
    outside = {source for named in sources.values() for source in named} - set(sources)
    known = dict(
        Closure.objects.filter(entry_id__in=outside)
        .values("entry_id")
        .annotate(rows=Count("id"))
        .values_list("entry_id", "rows")
    )
    ceiling = sum(known.values())
    estimate: dict[str, int] = {}
    batches: list[list[str]] = []
    batch: list[str] = []
    batch_rows = placed = 0
    for component in components(sources):
        members = set(component)
        placed += len(component)
        reached = {source for member in component for source in sources[member]} - members
        size = min(
            len(component) + sum(estimate.get(s, known.get(s, 0)) for s in reached),
            placed + ceiling,
        )
        for member in component:
            estimate[member] = size
        rows = size * len(component)
        if batch and (
            len(batch) + len(component) > limits.entries or batch_rows + rows > limits.closure_rows
        ):
            batches.append(batch)
            batch, batch_rows = [], 0
        batch += component
        batch_rows += rows
    if batch:
        batches.append(batch)
    return batches


def components(sources: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of the references among `sources`' keys, each after
    the components it names (Tarjan's algorithm, iterative)."""
    edges = {entry_id: [s for s in named if s in sources] for entry_id, named in sources.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sources:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, 0)]
        while work:
            node, position = work[-1]
            if position < len(edges[node]):
                work[-1] = (node, position + 1)
                target = edges[node][position]
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while not component or component[-1] != node:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                components.append(component)
    return components
