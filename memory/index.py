"""Writing the term index: the hashed terms of entries, written in the same transaction as
the entries, and re-keyed by `manage.py reindex` after the index key changed; and each pool's
count of the entries that hold a term (PoolTerm), kept with the term rows: every term row is
written by `entries_index` and deleted by `terms_delete`."""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import connection

from memory.lock import pool_write
from memory.models import Entry, EntryTerm, PoolTerm
from memory.notes import content_key
from memory.terms import term_hash, text_terms
from openbot.fields import readable_values

# Term counts per statement: three values each, within SQLite's 999 (older builds).
COUNTS_PER_STATEMENT = 300


def _rows(bot_id: str, entry_id: str, content: str) -> list[EntryTerm]:
    counts = text_terms(content)
    length = sum(counts.values())
    return [
        EntryTerm(
            entry_id=entry_id,
            bot_id=bot_id,
            term=term_hash(term),
            frequency=frequency,
            length=length,
        )
        for term, frequency in counts.items()
    ]


def entries_index(*, bot_id: str, entries: Iterable[tuple[str, str]]) -> None:
    """Index new entries, given as (id, content), of `bot_id`'s pool; the caller's
    transaction writes them with the entries."""
    rows = [row for entry_id, content in entries for row in _rows(bot_id, entry_id, content)]
    EntryTerm.objects.bulk_create(rows, batch_size=1000)
    # In one order, so that two writers never wait on each other's counts in a cycle.
    counts = sorted(Counter(row.term for row in rows).items())
    table = connection.ops.quote_name(PoolTerm._meta.db_table)
    with connection.cursor() as cursor:
        for start in range(0, len(counts), COUNTS_PER_STATEMENT):
            batch = counts[start : start + COUNTS_PER_STATEMENT]
            cursor.execute(
                f"INSERT INTO {table} (bot_id, term, entries)"
                f" VALUES {', '.join(['(%s, %s, %s)'] * len(batch))}"
                f" ON CONFLICT (bot_id, term) DO UPDATE SET entries = {table}.entries"
                " + excluded.entries",
                [value for term, count in batch for value in (bot_id, term, count)],
            )


def terms_delete(*, pool_id: str, entry_ids: list[str]) -> None:
    """Delete the term rows of the pool's `entry_ids`, and count them out of the pool's term
    counts (a count that falls to 0 goes: no hash of a term no entry holds stays behind)."""
    if not entry_ids:
        return
    terms = connection.ops.quote_name(EntryTerm._meta.db_table)
    counts = connection.ops.quote_name(PoolTerm._meta.db_table)
    among = f"t.entry_id IN ({', '.join(['%s'] * len(entry_ids))})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {counts} SET entries = {counts}.entries - h.n FROM ("
            f"SELECT t.term, COUNT(*) AS n FROM {terms} t WHERE {among} GROUP BY t.term"
            f") h WHERE {counts}.bot_id = %s AND {counts}.term = h.term",
            [*entry_ids, pool_id],
        )
        cursor.execute(
            f"DELETE FROM {counts} WHERE bot_id = %s AND entries <= 0"
            f" AND term IN (SELECT t.term FROM {terms} t WHERE {among})",
            [pool_id, *entry_ids],
        )
    EntryTerm.objects.filter(entry_id__in=entry_ids).delete()


def entries_reindex(*, bot_id: str, entries: list[tuple[str, str]]) -> None:
    """Replace the index rows and the content keys of `entries` (id, content) with
    those under the current key."""
    terms_delete(pool_id=bot_id, entry_ids=[entry_id for entry_id, _ in entries])
    entries_index(bot_id=bot_id, entries=entries)
    Entry.objects.bulk_update(
        [
            Entry(id=entry_id, content_key=content_key(pool_id=bot_id, content=content))
            for entry_id, content in entries
        ],
        ["content_key"],
    )


@dataclass(frozen=True)
class Reindexed:
    """What `index_rekey` did: entries re-keyed, and entries whose content no key opens."""

    reindexed: int
    unreadable: list[str]


def index_rekey(*, batch_size: int, progress: Callable[[int, int], None]) -> Reindexed:
    """Rewrite every entry's index rows under the current index key, in batches by id;
    each batch holds its pool's write lock so that no entry changes or goes under it.
    `progress(done, total)` is called after each batch."""
    total = Entry.objects.count()
    done, reindexed, unreadable = 0, 0, []
    entries = Entry.objects.order_by("id").values_list("id", "bot_id")
    last: str | None = None
    while True:
        batch = list((entries if last is None else entries.filter(id__gt=last))[:batch_size])
        if not batch:
            break
        last = batch[-1][0]
        by_bot: dict[str, list[str]] = defaultdict(list)
        for entry_id, bot_id in batch:
            by_bot[bot_id].append(entry_id)
        for bot_id, ids in by_bot.items():
            with pool_write(bot_id):
                rows = readable_values(Entry.objects.filter(id__in=ids), "id", "content")
                entries_reindex(
                    bot_id=bot_id, entries=[(row["id"], row["content"]) for row in rows]
                )
            opened = {row["id"] for row in rows}
            reindexed += len(opened)
            unreadable += [entry_id for entry_id in ids if entry_id not in opened]
        done += len(batch)
        progress(done, total)
    return Reindexed(reindexed=reindexed, unreadable=unreadable)
