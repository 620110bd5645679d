"""Every change of a memory pool: one transaction under the write lock, one version and
one change-log record (zulip's `do_*` actions writing their audit log with the change).

Learning applies many changes as one version: it opens `pool_change` and calls the
`*_in(change, …)` operations. The public one-shot services wrap a single operation.
Tag and status changes never touch `content` [X3].
"""

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from memory import graph
from memory.index import entries_index
from memory.lock import pool_write
from memory.models import (
    SCOPE_MANY,
    Change,
    ChangeEntry,
    Entry,
    EntrySource,
    EntryTag,
    Evidence,
    Pool,
)
from memory.models import entry_id as new_entry_id
from memory.notes import content_key
from memory.rows import CONTEXT_LINE_OVERHEAD
from memory.selectors import ENRICHMENT_CONTEXT_LIMIT
from memory.tasks import vectors_request
from memory.topics import TOPIC_MAX_LENGTH, topic_of, topics_of
from openbot import compiled
from openbot.clock import now_ms
from openbot.errors import ApplicationError, Conflict, invalid
from openbot.fields import encrypt
from openbot.idempotency import UNCLAIMED, Claim

MAX_CONTENT = 10_000
# [E8] A Remembered entry always fits the enrichment context: its line, alone, fills the room
# at most. Derived from the enrichment's own limit, so the two cannot drift apart.
REMEMBER_MAX_CONTENT = ENRICHMENT_CONTEXT_LIMIT - CONTEXT_LINE_OVERHEAD


def tag_kind(tag: str) -> str:
    """`from`, `for`, `org`, `chat`, `channel`, `app` for OpenBot's tags; `topic` otherwise."""
    return tag.split(":", 1)[0] if ":" in tag else "topic"


def is_topic(tag: object) -> bool:
    """Whether `tag` is a topic (stored in NFC: `topic_of`)."""
    return topic_of(tag) is not None


def check_topics(topics: list[str], field_name: str = "tags") -> list[str]:
    """Topics only, in NFC and without repeats; anything else (a colon tag, an uppercase
    letter, a stray hyphen) is a 400 naming `field_name`."""
    checked = topics_of(topics)
    if checked is None:
        raise invalid(
            field_name,
            "tags must be topics: lowercase letters of any script, digits and single inner "
            f"hyphens, at most {TOPIC_MAX_LENGTH} characters (tags with a colon belong to "
            "OpenBot)",
        )
    return checked


@dataclass(frozen=True)
class ItemEvidence:
    """The access rule of one source item: `person:<u>` or `channel:<c>`, and the org."""

    chat_id: str
    item_seq: int
    rule: str
    organization_id: str


def _scope(values: Iterable[str]) -> str:
    """'' for no value, the one value, or `SCOPE_MANY` for several; an empty value cannot be
    told from none, so it counts as several (the rule then reads the rows themselves)."""
    distinct = set(values)
    if len(distinct) == 1 and "" not in distinct:
        return distinct.pop()
    return "" if not distinct else SCOPE_MANY


def row_access(
    *, tags: list[str], evidence: list[ItemEvidence], source_entries: list[str]
) -> dict[str, Any]:
    """What the access rule reads in a new entry's own row: whether it names a source entry,
    its `org_scope` and `rule_scope` (`Entry`); ids hold no space, so "<org> <rule>" is one."""
    return {
        "depends": bool(source_entries),
        "org_scope": _scope(tag.removeprefix("org:") for tag in tags if tag_kind(tag) == "org"),
        "rule_scope": _scope(f"{item.organization_id} {item.rule}" for item in evidence),
    }


@dataclass
class PoolChange:
    """The change being built inside `pool_change`: the ids it touched and what it did."""

    pool_id: str
    by: str
    at: int
    touched: list[str] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    structural: set[str] = field(default_factory=set)
    version: int | None = None

    def record(self, entry_id: str, operation: dict[str, Any], structural: bool = False) -> None:
        if entry_id not in self.touched:
            self.touched.append(entry_id)
        self.operations.append({"id": entry_id, **operation})
        if structural:
            self.structural.add(entry_id)


def pool_of(pool_id: str) -> Pool:
    pool, _ = Pool.objects.get_or_create(bot_id=pool_id)
    return pool


@contextmanager
def pool_change(*, pool_id: str, by: str, always: bool = False) -> Iterator[PoolChange]:
    """Hold the pool's write lock; on exit take the next version and log the change. A change
    that touched nothing takes no version, unless `always` (a purge is logged regardless)."""
    with pool_write(pool_id):
        change = PoolChange(pool_id=pool_id, by=by, at=now_ms())
        yield change
        if change.structural:
            graph.refresh(pool_id=pool_id, changed_ids=change.structural)
        if not (change.touched or always):
            return
        change.version = _logged(change)


def _logged(change: PoolChange) -> int:
    """[E7] Take the pool's next version and log the change with the entries it touched, in
    their order; the pool's row is created at its first change. On PostgreSQL one statement
    (`_LOGGED`), as each statement of a change is a round trip under the pool's lock;
    SQLite, in-process, takes three."""
    operations = json.dumps(change.operations)
    if connection.vendor != "postgresql":
        version = _version_next(change.pool_id)
        record = Change.objects.create(
            bot_id=change.pool_id, version=version, at=change.at, by=change.by, payload=operations
        )
        ChangeEntry.objects.bulk_create(
            [ChangeEntry(change=record, entry_id=entry_id) for entry_id in change.touched]
        )
        return version
    with compiled.cursor() as cursor:
        cursor.execute(
            _LOGGED,
            {
                "pool": change.pool_id,
                "at": change.at,
                "by": change.by,
                "payload": encrypt(operations),
                "touched": change.touched,
            },
        )
        row = cursor.fetchone()
    if row is None:
        pool_of(change.pool_id)
        return _logged(change)
    return int(row[0])


# The next version, the change and its entries in their order (`ChangeEntry` ids follow it).
_LOGGED = f"""
    WITH version AS (
        UPDATE {Pool._meta.db_table} SET version = version + 1 WHERE bot_id = %(pool)s
        RETURNING version
    ), change AS (
        INSERT INTO {Change._meta.db_table} (bot_id, version, "at", "by", payload)
        SELECT %(pool)s, version, %(at)s, %(by)s, %(payload)s FROM version
        RETURNING id, version
    ), touched AS (
        INSERT INTO {ChangeEntry._meta.db_table} (change_id, entry_id)
        SELECT change.id, touched.entry_id
        FROM change, unnest(%(touched)s::varchar[]) WITH ORDINALITY AS touched(entry_id, place)
        ORDER BY touched.place
    )
    SELECT version FROM change
"""


def _version_next(pool_id: str) -> int:
    """Take the pool's next version in one statement; the pool's row is made at its first."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Pool._meta.db_table} SET version = version + 1 WHERE bot_id = %s"
            " RETURNING version",
            [pool_id],
        )
        row = cursor.fetchone()
    if row is None:
        pool_of(pool_id)
        return _version_next(pool_id)
    return int(row[0])


def _add_tags(entry: Entry, tags: list[str]) -> None:
    EntryTag.objects.bulk_create(
        [EntryTag(entry=entry, bot_id=entry.bot_id, tag=tag, kind=tag_kind(tag)) for tag in tags],
        ignore_conflicts=True,
    )


def entry_create_in(
    change: PoolChange,
    *,
    layer: str,
    content: str,
    tags: list[str],
    source_items: list[tuple[str, int]] = (),  # type: ignore[assignment]
    source_entries: list[str] = (),  # type: ignore[assignment]
    evidence: list[ItemEvidence] = (),  # type: ignore[assignment]
    confidence: float | None = None,
    status: str = Entry.Status.ACTIVE,
    said_at: int | None = None,
) -> Entry:
    """Store a new entry with its tags, sources and evidence; the caller built the tags."""
    if not content or len(content) > MAX_CONTENT:
        raise invalid("content", f"must be 1 to {MAX_CONTENT} characters")
    new = ImportedEntry(
        id=new_entry_id(),
        layer=layer,
        content=content,
        tags=tags,
        status=status,
        source_items=list(source_items),
        source_entries=list(source_entries),
        evidence=list(evidence),
        confidence=confidence,
        said_at=said_at,
    )
    [entry] = _entries_insert(change, [new])
    change.record(entry.id, {"op": "add", "layer": layer, "content": content})
    # Refreshed at once, so later operations of the same change see its access data.
    if source_entries:
        graph.refresh(pool_id=change.pool_id, changed_ids=[entry.id])
    else:
        graph.refresh_new(pool_id=change.pool_id, entry_id=entry.id)
    return entry


def entry_set_status_in(change: PoolChange, *, entry_id: str, status: str) -> None:
    """Invalidate or retract an entry; its dependents are hidden. Content untouched."""
    fields: dict[str, Any] = {"status": status, "updated_at": change.at}
    if status == Entry.Status.INVALIDATED:
        fields["invalidated_at"] = change.at
    # The closure stays; the dependents' soundness follows in set-based SQL.
    graph.status_changing(pool_id=change.pool_id, entry_id=entry_id, status=status)
    Entry.objects.filter(bot_id=change.pool_id, id=entry_id).update(**fields)
    change.record(entry_id, {"op": status})


def entry_topics_in(
    change: PoolChange, *, entry_id: str, add: list[str], remove: list[str]
) -> None:
    """Change an entry's topics; OpenBot's colon tags are never touched here."""
    add, remove = check_topics(add), check_topics(remove)
    EntryTag.objects.filter(entry_id=entry_id, kind="topic", tag__in=remove).delete()
    _add_tags(Entry(id=entry_id, bot_id=change.pool_id), add)
    Entry.objects.filter(id=entry_id).update(updated_at=change.at)
    change.record(entry_id, {"op": "topics", "add": add, "remove": remove})


def topic_rename_in(change: PoolChange, *, old: str, new: str) -> int:
    """[W6] Rename a topic on every matching entry of the pool, not only those shown."""
    (old,), (new,) = check_topics([old], "topic"), check_topics([new], "topic")
    entry_ids = list(
        EntryTag.objects.filter(bot_id=change.pool_id, tag=old).values_list("entry_id", flat=True)
    )
    for entry_id in entry_ids:
        entry_topics_in(change, entry_id=entry_id, add=[new], remove=[old])
    return len(entry_ids)


def entry_remember(
    *,
    pool_id: str,
    person_id: str,
    organization_id: str,
    content: str,
    topics: list[str],
    said_at: int | None = None,
    claim: Claim = UNCLAIMED,
) -> Entry:
    """[V2] A pinned entry for its author only, in the author's organization; recorded for
    the request's `Idempotency-Key` (`claim`) in the same transaction. Content longer than
    the enrichment context's room is a 400 naming `content`."""
    if len(content) > REMEMBER_MAX_CONTENT:
        raise invalid("content", f"must be at most {REMEMBER_MAX_CONTENT} characters")
    topics = check_topics(topics)
    with pool_change(pool_id=pool_id, by=Change.By.PERSON) as change:
        entry = entry_create_in(
            change,
            layer=Entry.Layer.PINNED,
            content=content,
            tags=[f"from:{person_id}", f"for:person:{person_id}", f"org:{organization_id}"]
            + topics,
            evidence=[
                ItemEvidence(
                    chat_id="",
                    item_seq=0,
                    rule=f"person:{person_id}",
                    organization_id=organization_id,
                )
            ],
            said_at=said_at,
        )
        claim.made(entry.id)
        return entry


@dataclass(frozen=True)
class ImportedEntry:
    """A new entry's rows: one `entry_create_in` stores, or one from an older version
    ("promotion", `entries_import`), possibly without provable access."""

    id: str
    layer: str
    content: str
    tags: list[str]
    status: str = Entry.Status.ACTIVE
    source_items: list[tuple[str, int]] = field(default_factory=list)
    source_entries: list[str] = field(default_factory=list)
    evidence: list[ItemEvidence] = field(default_factory=list)
    confidence: float | None = None
    updated_at: int | None = None
    said_at: int | None = None


def entries_import(
    *, pool_id: str, entries: list[ImportedEntry], limits: graph.ImportLimits | None = None
) -> None:
    """Store entries as they were; sources may be missing or form cycles.

    Nothing is rebuilt or widened [V7]: an entry whose access cannot be proven stays hidden.
    The import commits in batches, each its own change, so that no batch holds the
    pool's lock long: every entry comes after the imported entries it names, so until a
    batch commits, whatever names its entries names a missing source and stays hidden. A
    failed batch leaves the batches before it in place.
    """
    by_id = {item.id: item for item in entries}
    if len(by_id) != len(entries):
        raise ApplicationError("imported entries must have distinct ids")
    batches = graph.import_batches(
        sources={item.id: item.source_entries for item in entries},
        limits=limits or graph.ImportLimits(),
    )
    for batch_ids in batches:
        with pool_change(pool_id=pool_id, by=Change.By.PROMOTION) as change:
            _entries_insert(change, [by_id[entry_id] for entry_id in batch_ids])
            for entry_id in batch_ids:
                change.record(entry_id, {"op": "import"}, structural=True)


def _entries_insert(change: PoolChange, batch: list[ImportedEntry]) -> list[Entry]:
    """The rows of new entries: each with its tags, search terms, sources and evidence. The
    caller records the change and refreshes what the access rule derives."""
    entries = Entry.objects.bulk_create(
        [
            Entry(
                id=item.id,
                bot_id=change.pool_id,
                layer=item.layer,
                content=item.content,
                content_length=len(item.content),
                content_key=content_key(pool_id=change.pool_id, content=item.content),
                status=item.status,
                created_at=item.updated_at or change.at,
                updated_at=item.updated_at or change.at,
                invalidated_at=change.at if item.status == Entry.Status.INVALIDATED else None,
                said_at=item.updated_at or change.at if item.said_at is None else item.said_at,
                confidence=item.confidence,
                rank=0 if item.layer == Entry.Layer.PINNED else 1,
                **row_access(
                    tags=item.tags, evidence=item.evidence, source_entries=item.source_entries
                ),
            )
            for item in batch
        ]
    )
    entries_index(bot_id=change.pool_id, entries=[(item.id, item.content) for item in batch])
    vectors_request(change.pool_id)
    EntryTag.objects.bulk_create(
        [
            EntryTag(entry_id=item.id, bot_id=change.pool_id, tag=tag, kind=tag_kind(tag))
            for item in batch
            for tag in dict.fromkeys(item.tags)
        ]
    )
    EntrySource.objects.bulk_create(
        [
            EntrySource(entry_id=item.id, position=index, chat_id=chat, item_seq=seq)
            for item in batch
            for index, (chat, seq) in enumerate(item.source_items)
        ]
        + [
            EntrySource(
                entry_id=item.id,
                position=len(item.source_items) + index,
                source_entry_id=source,
            )
            for item in batch
            for index, source in enumerate(item.source_entries)
        ]
    )
    Evidence.objects.bulk_create(
        [
            Evidence(
                entry_id=item.id,
                rule=proof.rule,
                organization_id=proof.organization_id,
                chat_id=proof.chat_id,
                item_seq=proof.item_seq,
            )
            for item in batch
            for proof in item.evidence
        ]
    )
    return entries


def memory_settings_update(*, pool_id: str, expected: int, changes: dict[str, Any]) -> Pool:
    """[A5] Change the memory bot's settings if `expected` is the current settings version."""
    allowed = {"instructions", "concurrency", "budget_period", "budget_limit_micros", "recall"}
    if set(changes) - allowed:
        raise ApplicationError(f"unknown settings: {sorted(set(changes) - allowed)}")
    with pool_write(pool_id):
        pool = Pool.objects.select_for_update().filter(bot_id=pool_id).first() or pool_of(pool_id)
        if pool.settings_version != expected:
            raise Conflict(
                f"expected: settings are at version {pool.settings_version}, not {expected}",
                code="version_conflict",
            )
        for name, value in changes.items():
            setattr(pool, name, value)
        pool.settings_version += 1
        pool.save(update_fields=[*changes, "settings_version"])
        return pool
