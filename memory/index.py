"""Writing the term index: the hashed terms of entries, written in the same transaction as
the entries, and re-keyed by `manage.py reindex` after the index key changed."""

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memory.lock import pool_write
from memory.models import Entry, EntryTerm
from memory.notes import content_key
from memory.terms import term_hash, text_terms
from openbot.fields import readable_values


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
    EntryTerm.objects.bulk_create(
        [row for entry_id, content in entries for row in _rows(bot_id, entry_id, content)],
        batch_size=1000,
    )


def entries_reindex(*, bot_id: str, entries: list[tuple[str, str]]) -> None:
    """Replace the index rows and the content keys of `entries` (id, content) with
    those under the current key."""
    EntryTerm.objects.filter(entry_id__in=[entry_id for entry_id, _ in entries]).delete()
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
