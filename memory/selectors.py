"""Reads of a memory pool, each under the pool's shared lock [L1] and the access rule [V4].

Server callers use `context`, `has_entries` and `validate_references` [S1–S3]; they never load
a pool or check access one entry at a time themselves.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from memory.access import Reader, visible_entries, visible_ids
from memory.lock import pool_read
from memory.models import Change, ChangeEntry, Entry, EntrySource, EntryTag, Pool
from openbot.models import Bot

CONTEXT_LINE_OVERHEAD = len("- \n")


def pool_version(pool_id: str) -> int:
    return Pool.objects.filter(bot_id=pool_id).values_list("version", flat=True).first() or 0


def entry_bodies(ids: list[str]) -> list[dict[str, Any]]:
    """The public format [E1, E4] of `ids`, in that order: decrypts exactly these entries."""
    entries = {entry.id: entry for entry in Entry.objects.filter(id__in=ids)}
    tags: dict[str, list[str]] = defaultdict(list)
    for entry_id, tag in (
        EntryTag.objects.filter(entry_id__in=ids).order_by("id").values_list("entry_id", "tag")
    ):
        tags[entry_id].append(tag)
    sources: dict[str, list[dict[str, str | None]]] = defaultdict(list)
    for entry_id, chat_id, item_seq, source_entry_id in (
        EntrySource.objects.filter(entry_id__in=ids)
        .order_by("entry_id", "position")
        .values_list("entry_id", "chat_id", "item_seq", "source_entry_id")
    ):
        source: dict[str, str | None] = (
            {"entry": source_entry_id}
            if source_entry_id is not None
            else {"chat": chat_id, "item": f"i-{item_seq}"}
        )
        sources[entry_id].append(source)
    bodies = []
    for entry_id in ids:
        entry = entries[entry_id]
        body: dict[str, Any] = {
            "id": entry.id,
            "layer": entry.layer,
            "content": entry.content,
            "tags": tags[entry_id],
            "sources": sources[entry_id],
            "status": entry.status,
            "createdAt": entry.created_at,
            "updatedAt": entry.updated_at,
        }
        if entry.invalidated_at is not None:
            body["invalidatedAt"] = entry.invalidated_at
        if entry.layer == Entry.Layer.OBSERVATION:
            body["confidence"] = entry.confidence
        bodies.append(body)
    return bodies


def entries_for_reader(
    *, pool_id: str, reader: Reader, tags: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """[A1] Entries for the reader, the history included [V6], in memory order, and the version."""
    with pool_read(pool_id):
        entries = visible_entries(pool_id=pool_id, reader=reader, active_only=False)
        for tag in tags:
            entries = entries.filter(tag_rows__tag=tag)
        ids = list(entries.values_list("id", flat=True))
        return entry_bodies(ids), pool_version(pool_id)


@dataclass(frozen=True)
class Context:
    """[S1] Text for the model and the ids of the entries in it."""

    text: str
    entry_ids: list[str]


def context(bot: Bot, readers: Reader, limit: int) -> Context:
    """[S1] Active visible entries in memory order, up to the first that does not fit `limit`
    characters; entries after it are not decrypted."""
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        entries = visible_entries(pool_id=pool_id, reader=readers, active_only=True)
        chosen: list[str] = []
        used = 0
        offset, batch = 0, 32
        while True:
            rows = list(entries.values_list("id", "content_length")[offset : offset + batch])
            for entry_id, length in rows:
                if used + length + CONTEXT_LINE_OVERHEAD > limit:
                    rows = []
                    break
                used += length + CONTEXT_LINE_OVERHEAD
                chosen.append(entry_id)
            else:
                if len(rows) == batch:
                    offset += batch
                    batch *= 2
                    continue
            break
        contents = dict(Entry.objects.filter(id__in=chosen).values_list("id", "content"))
    text = "".join(f"- {contents[entry_id]}\n" for entry_id in chosen)
    return Context(text=text, entry_ids=chosen)


def has_entries(bot: Bot, readers: Reader) -> bool:
    """[S2] Whether any active entry is visible, even if none fits; decrypts nothing."""
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        return visible_entries(pool_id=pool_id, reader=readers, active_only=True).exists()


def validate_references(bot: Bot, readers: Reader, ids: list[str]) -> bool:
    """[S3] Whether a stored model answer naming `ids` may still be used: every entry (and,
    through the access rule, every source) is active and visible now; no content is read."""
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        wanted = set(ids)
        return wanted <= visible_ids(
            pool_id=pool_id, reader=readers, ids=list(wanted), active_only=True
        )


def change_log(*, pool_id: str, reader: Reader, since: int) -> tuple[list[dict[str, Any]], int]:
    """[A3] Changes after version `since`, each with only the ids the reader may see now."""
    with pool_read(pool_id):
        touched: dict[int, list[str]] = defaultdict(list)
        for change_id, entry_id in (
            ChangeEntry.objects.filter(change__pool_id=pool_id, change__version__gt=since)
            .order_by("id")
            .values_list("change_id", "entry_id")
        ):
            touched[change_id].append(entry_id)
        seen = visible_ids(
            pool_id=pool_id,
            reader=reader,
            ids=sorted({entry_id for ids in touched.values() for entry_id in ids}),
            active_only=False,
        )
        changes = []
        for change_id, version, at, by in (
            Change.objects.filter(id__in=touched)
            .order_by("version")
            .values_list("id", "version", "at", "by")
        ):
            ids = [entry_id for entry_id in touched[change_id] if entry_id in seen]
            if ids:
                changes.append({"version": version, "at": at, "by": by, "ids": ids})
        return changes, pool_version(pool_id)
