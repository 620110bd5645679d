"""Reads of a memory pool, each under the pool's shared lock [L1] (or, for a full listing and a
`context` without a query, one statement that takes it if no change holds it and checks the
reader's rights in its own snapshot) and the access rule [V4].

Server callers use `context`, `has_entries` and `validate_references` [S1–S3]; they never load
a pool or check access one entry at a time themselves.
"""

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import BigIntegerField, Count, Exists, Q, QuerySet, Subquery, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from memory.access import (
    Reader,
    admitted_within,
    any_visible,
    every_visible_entry,
    valid_in_organization,
    visible_entries,
    visible_ids,
    visible_in_order,
)
from memory.compiled import Shape, shape_of, tag_stand_ins
from memory.lock import pool_key, pool_read, shared_in_statement
from memory.models import Change, ChangeEntry, Entry, EntrySource, EntryTag, Pool
from memory.relevance import relevant_in_order
from openbot.access import rights_in, rights_seen
from openbot.compiled import compiled, stand_in
from openbot.fields import readable_rows, readable_values, sealed_values
from openbot.models import Bot

# [S1] Each entry of a context is a line "- <content>\n".
CONTEXT_LINE_OVERHEAD = len("- \n")
# [N1, E8] The room, in characters, of the context enrichment offers the model: what a
# Remembered entry must fit (`memory.services.REMEMBER_MAX_CONTENT`).
ENRICHMENT_CONTEXT_LIMIT = 4000
T = TypeVar("T")


def pool_settings(pool_id: str) -> Pool:
    """[A5] The pool's settings; a pool nobody changed yet has the defaults (not stored)."""
    return Pool.objects.filter(bot_id=pool_id).first() or Pool(bot_id=pool_id)


def pool_version(pool_id: str) -> int:
    return Pool.objects.filter(bot_id=pool_id).values_list("version", flat=True).first() or 0


# The columns of an entry's row [E1, E4]; `content` is decrypted as it is read.
ENTRY_FIELDS = (
    "id",
    "layer",
    "content",
    "status",
    "created_at",
    "updated_at",
    "invalidated_at",
    "confidence",
)


def entry_row(entry: Entry) -> dict[str, Any]:
    """An entry just written as `EntryOutput` shows it [E1, E4], from the row in hand and its
    tags and sources: its content is not read back or decrypted, so there is nothing damaged to
    fail on [X5]."""
    details = with_details(Entry.objects.filter(id=entry.id)).values(*DETAILS).get()
    return with_tags_and_sources([{name: getattr(entry, name) for name in ENTRY_FIELDS} | details])[
        0
    ]


# An entry's tags and sources, each an array read with the entry [Q4]: the tags in the order
# they were added, the sources as [chat, item, entry] in their order [E2]. PostgreSQL's own
# arrays (psycopg reads them faster than JSON; the item as text there), JSON on SQLite.
_DETAILS_SQL = {
    "postgresql": {
        "tags": "ARRAY(SELECT t.tag FROM {tag} t WHERE t.entry_id = {entry}.id ORDER BY t.id)",
        "sources": "ARRAY(SELECT ARRAY[s.chat_id, s.item_seq::text, s.source_entry_id] "
        "FROM {source} s WHERE s.entry_id = {entry}.id ORDER BY s.position)",
    },
    "sqlite": {
        "tags": "SELECT json_group_array(tag) FROM (SELECT t.tag FROM {tag} t "
        "WHERE t.entry_id = {entry}.id ORDER BY t.id)",
        "sources": "SELECT json_group_array(json_array(chat_id, item_seq, source_entry_id)) "
        "FROM (SELECT s.chat_id, s.item_seq, s.source_entry_id FROM {source} s "
        "WHERE s.entry_id = {entry}.id ORDER BY s.position)",
    },
}
DETAILS = ("tag_list", "source_list")


def with_details(entries: QuerySet[Entry]) -> QuerySet[Entry]:
    """`entries` with their tags and sources (`DETAILS`), in the same query [Q4]."""
    tables = {
        "entry": connection.ops.quote_name(Entry._meta.db_table),
        "tag": connection.ops.quote_name(EntryTag._meta.db_table),
        "source": connection.ops.quote_name(EntrySource._meta.db_table),
    }
    sql = _DETAILS_SQL[connection.vendor]
    # Only table names are put into the SQL; it takes no parameters.
    return entries.annotate(
        tag_list=RawSQL(sql["tags"].format(**tables), (), output_field=TextField()),  # noqa: S611
        source_list=RawSQL(  # noqa: S611
            sql["sources"].format(**tables), (), output_field=TextField()
        ),
    )


def with_tags_and_sources(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entry rows (`ENTRY_FIELDS` and `DETAILS`) with their `tags` and `sources` (in order)."""
    for row in rows:
        row["tags"] = _listed(row.pop("tag_list"))
        row["sources"] = [
            {
                "chat_id": chat_id,
                "item_seq": None if item_seq is None else int(item_seq),
                "source_entry_id": source_entry_id,
            }
            for chat_id, item_seq, source_entry_id in _listed(row.pop("source_list"))
        ]
    return rows


def _listed(value: list[Any] | str) -> list[Any]:
    """An array of `with_details`: a list on PostgreSQL, JSON text on SQLite."""
    return json.loads(value) if isinstance(value, str) else value


# A place in memory order [E6]: (rank, updatedAt, id) of the last entry of a page.
Position = tuple[int, int, str]


def entries_for_reader(
    *, pool_id: str, reader: Reader, tags: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """[A1] Entries for the reader, the history included [V6], in memory order, and the version."""
    entries, version, _ = entry_page_for_reader(
        pool_id=pool_id, reader=reader, tags=tags, after=None, limit=None
    )
    return entries, version


def entry_page_for_reader(
    *, pool_id: str, reader: Reader, tags: list[str], after: Position | None, limit: int | None
) -> tuple[list[dict[str, Any]], int, Position | None]:
    """[A1, A10] The reader's entries after `after` in memory order, at most `limit` of them
    (all without a limit), the version, and the position to read on from (None at the end)."""
    if after is None and limit is None:
        listing = _outside_the_lock(
            reader,
            lambda guessed: _listing_outside_the_lock(pool_id=pool_id, reader=guessed, tags=tags),
        )
        if listing is not None:
            listed, version = listing
            return listed, version, None
    with pool_read(pool_id):
        reader = reader.as_of_now()
        if after is None and limit is None:
            shape = shape_of(pool_id=pool_id, reader=reader, tags=tags)
            listed = _all_for_reader(shape, checks=())
            version = listed[0]["pool_version"] if listed else pool_version(pool_id)
            return _opened_entries(listed), version or 0, None
        entries = every_visible_entry(pool_id=pool_id, reader=reader, active_only=False)
        for tag in tags:
            entries = entries.filter(tag_rows__tag=tag)
        if after is not None:
            rank, updated_at, entry_id = after
            entries = entries.filter(
                Q(rank__gt=rank)
                | Q(rank=rank, updated_at__lt=updated_at)
                | Q(rank=rank, updated_at=updated_at, id__gt=entry_id)
            )
        if limit is None:
            # Every visible entry is in the response, so its content is read in the same
            # query; [X5] an entry no key opens is left out of it.
            found = readable_values(with_details(entries), *ENTRY_FIELDS, *DETAILS)
            return with_tags_and_sources(found), pool_version(pool_id), None
        # The page's places first (no content), then the content of exactly those entries.
        places = list(entries.values_list("rank", "updated_at", "id")[: limit + 1])
        page = places[:limit]
        rows = {
            row["id"]: row
            for row in readable_values(
                with_details(Entry.objects.filter(id__in=[entry_id for _, _, entry_id in page])),
                *ENTRY_FIELDS,
                *DETAILS,
            )
        }
        bodies = with_tags_and_sources(
            [rows[entry_id] for _, _, entry_id in page if entry_id in rows]
        )
        return bodies, pool_version(pool_id), page[-1] if len(places) > limit else None


@dataclass(frozen=True)
class _UnlockedRead(Generic[T]):
    """A read of one statement outside the pool's lock: what it found if it stands (`found`
    is None if not), and the rights its statement saw if they were not the reader's."""

    found: T | None
    rights: tuple[frozenset[str], bool] | None = None


def _outside_the_lock(reader: Reader, read: Callable[[Reader], _UnlockedRead[T]]) -> T | None:
    """[L1, Q4] What `read` finds outside the pool's lock with the reader's rights as last
    read, which its statement checks in its own snapshot; again with the rights it saw if they
    were others. None if neither stands, or if the reader's rights cannot be read in a
    statement: the caller reads under the pool's lock then."""
    if not _rights_in_statement(reader):
        return None
    first = read(reader.as_guessed())
    if first.rights is None:
        return first.found
    channel_ids, bot_user = first.rights
    return read(replace(reader, channel_ids=channel_ids, bot_user=bot_user)).found


def _shape_with_checks(*, pool_id: str, reader: Reader, tags: list[str]) -> Shape:
    """A read's shape, with the values the checks of a read outside the lock need."""
    shape = shape_of(pool_id=pool_id, reader=reader, tags=tags)
    # A string, as the stand-ins' values are; the statement casts it (`shared_in_statement`).
    shape.values[stand_in("lock")] = pool_key(pool_id)
    if reader.bot is not None:
        shape.values[stand_in("bot")] = reader.bot.id
    return shape


def _check_columns(shape: Shape, checks: tuple[str, ...]) -> dict[str, Any]:
    """[L1] The columns of `checks`: whether the statement took the pool's lock shared
    (`shared`), and the person's rights in its own snapshot (`rights`).

    A statement read outside the lock stands on the contents and rights of its own snapshot,
    if the rights it was built with are the person's there. Taking the lock only makes a read
    that finds a change under way read again under `pool_read`, which waits for it.
    """
    columns = {}
    if "shared" in checks:
        columns["shared"] = shared_in_statement(stand_in("lock"))
    if "rights" in checks:
        columns["rights"] = rights_seen(
            bot_id=stand_in("bot"),
            person_id=str(shape.reader.person_id),
            organization_id=shape.reader.organization_id,
        )
    return columns


def _rights_in_statement(reader: Reader) -> bool:
    """Whether a statement can read the reader's rights again in its own snapshot
    (`rights_seen` covers a person reading through a bot of their organization; other readers
    have none to read). A person reading a bot of another organization is read under the lock."""
    bot = reader.bot if reader.person_id is not None else None
    return bot is None or bot.organization_id == reader.organization_id


def _checks_of(reader: Reader) -> tuple[str, ...]:
    """[L1] The checks of a read outside the pool's lock: the person's rights too, for a person
    reading through a bot. Only for readers of `_rights_in_statement` (`rights_seen` reads a
    person's rights in a bot of their own organization)."""
    if reader.person_id is not None and reader.bot is not None:
        return ("shared", "rights")
    return ("shared",)


def _other_rights(row: dict[str, Any], reader: Reader) -> tuple[frozenset[str], bool] | None:
    """The person's rights in a row's `rights` check, if they are not the ones the reader
    was read with; None if they are (or the read had none to check)."""
    if "rights" not in row:
        return None
    assert reader.person_id is not None and reader.bot is not None
    seen = rights_in(
        row["rights"],
        bot=reader.bot,
        person_id=reader.person_id,
        organization_id=reader.organization_id,
    )
    return None if seen == (reader.channel_ids, reader.bot_user) else seen


def _listing_outside_the_lock(
    *, pool_id: str, reader: Reader, tags: list[str]
) -> _UnlockedRead[tuple[list[dict[str, Any]], int]]:
    """[L1, Q4] Every entry of `entries_for_reader` and the version in one statement, which
    stands if its checks say so; nothing is decrypted before. It reads no entry unless it took
    the lock; an empty answer has no row for the checks, so one more statement reads them with
    whether the reader sees anything."""
    shape = _shape_with_checks(pool_id=pool_id, reader=reader, tags=tags)
    checks = _checks_of(reader)
    rows = _all_for_reader(shape, checks=checks)
    head = rows[0] if rows else _nothing_for_reader(shape, checks=checks)
    if head is None:
        return _UnlockedRead(None)
    seen = _other_rights(head, reader)
    if seen is not None:
        return _UnlockedRead(None, rights=seen)
    if not rows and not (head["shared"] and head["nothing"]):
        return _UnlockedRead(None)
    version = head["pool_version"] or 0
    return _UnlockedRead((_opened_entries(rows), version))


def _filtered(shape: Shape) -> QuerySet[Entry]:
    """The listing's entries for the shape's stand-in reader and tags [V4, V6]."""
    entries = every_visible_entry(pool_id=shape.pool_id, reader=shape.reader, active_only=False)
    for tag in tag_stand_ins(shape):
        entries = entries.filter(tag_rows__tag=tag)
    return entries


def _version(shape: Shape) -> Subquery:
    return Subquery(Pool.objects.filter(bot_id=shape.pool_id).values("version")[:1])


def _all_for_reader(shape: Shape, *, checks: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every entry of `entries_for_reader` with the version and `checks` in each row, sealed,
    in one statement compiled once per reader shape [Q4]. Every visible entry is in the
    response, so its content is read in the same query. With `shared` among the checks, it
    reads no entry unless it takes the pool's lock."""

    def build() -> QuerySet[Any, Any]:
        columns = _check_columns(shape, checks)
        entries = with_details(_filtered(shape))
        if "shared" in columns:
            entries = entries.filter(columns.pop("shared"))
        entries = entries.annotate(pool_version=_version(shape), **columns)
        return sealed_values(entries, *ENTRY_FIELDS, *DETAILS, "pool_version", *columns)

    return compiled(("entries", shape.key, *checks), build).rows(shape.values, binary=True)


def _nothing_for_reader(shape: Shape, *, checks: tuple[str, ...]) -> dict[str, Any] | None:
    """The version, `checks` and whether the reader sees nothing, in one statement: one row,
    or None if the pool's bot is gone."""

    def build() -> QuerySet[Any, Any]:
        return (
            Bot.objects.filter(id=shape.pool_id)
            .annotate(
                pool_version=_version(shape),
                nothing=~Exists(_filtered(shape)),
                **_check_columns(shape, checks),
            )
            .values("pool_version", "nothing", *checks)
        )

    rows = compiled(("nothing", shape.key, *checks), build).rows(shape.values)
    return rows[0] if rows else None


def _opened_entries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sealed listing rows as entries: [X5] an entry no key opens is left out."""
    for row in rows:
        for name in ("pool_version", "rights"):
            row.pop(name, None)
    return with_tags_and_sources(readable_rows(Entry, rows))


def entry_for_reader(*, pool_id: str, reader: Reader, entry_id: str) -> dict[str, Any] | None:
    """[A11] One entry's row (as `entry_row`) if the reader may see it (history included [V6]),
    else None; [X5] an entry no key opens is None too."""
    with pool_read(pool_id):
        reader = reader.as_of_now()
        entries = visible_entries(pool_id=pool_id, reader=reader, active_only=False)
        rows = readable_values(with_details(entries.filter(id=entry_id)), *ENTRY_FIELDS, *DETAILS)
        return with_tags_and_sources(rows)[0] if rows else None


def _contents(ids: list[str]) -> dict[str, str]:
    """The content of each of `ids` that a key opens [X5]; decrypts exactly these entries."""
    return {
        row["id"]: row["content"]
        for row in readable_values(Entry.objects.filter(id__in=ids), "id", "content")
    }


@dataclass(frozen=True)
class Context:
    """[S1] Text for the model and the ids of the entries in it."""

    text: str
    entry_ids: list[str]
    # The content of each entry in `entry_ids`, in the same order.
    contents: list[str]


def context(bot: Bot, reader: Reader, limit: int, query: str | None = None) -> Context:
    """[S1] Active visible entries in memory order — with a `query`, those that match it, most
    relevant first [R1] — up to the first that does not fit `limit` characters; entries after
    it are not decrypted."""
    pool_id = bot.pool_bot_id
    contents = None
    if query is None:
        contents = _outside_the_lock(
            reader,
            lambda guessed: _context_outside_the_lock(pool_id=pool_id, reader=guessed, limit=limit),
        )
    if contents is None:
        with pool_read(pool_id):
            reader = reader.as_of_now()
            chosen, _ = _fitting(
                visible_in_order(pool_id=pool_id, reader=reader, active_only=True)
                if query is None
                else relevant_in_order(pool_id=pool_id, reader=reader, query=query),
                limit,
            )
            opened = _contents(chosen)
        # [X5] An entry no key opens is left out; the room it leaves is not filled.
        contents = [(entry_id, opened[entry_id]) for entry_id in chosen if entry_id in opened]
    return Context(
        text="".join(f"- {text}\n" for _, text in contents),
        entry_ids=[entry_id for entry_id, _ in contents],
        contents=[text for _, text in contents],
    )


def _fitting(entries: Iterable[tuple[str, int]], limit: int) -> tuple[list[str], bool]:
    """The ids of `entries` (id, content length) up to the first that does not fit `limit`
    characters as context lines, and whether one did not fit (else they all did)."""
    chosen: list[str] = []
    used = 0
    for entry_id, length in entries:
        if used + length + CONTEXT_LINE_OVERHEAD > limit:
            return chosen, True
        used += length + CONTEXT_LINE_OVERHEAD
        chosen.append(entry_id)
    return chosen, False


def _context_outside_the_lock(
    *, pool_id: str, reader: Reader, limit: int
) -> _UnlockedRead[list[tuple[str, str]]]:
    """[S1, L1, Q4] `context` without a query in one statement, which stands if its checks say
    so: (id, content) of the entries chosen, decrypting only them.

    It reads the admitted entries whose line would start within `limit` if every admitted
    entry before it were shown, with their sealed content, and checks only those (`blocked`):
    the sort of the admitted entries takes one index-only step each, the check is the cost
    [Q1]. A blocked entry among them leaves room for entries after them; if the context
    has not ended by then and admitted entries are left, it is read under the pool's lock, as
    it is if the statement reads nothing (nothing admitted, or a change holds the lock). The
    ciphertext of the rows read that are not chosen (blocked, or past the end) is never
    opened."""
    shape = _shape_with_checks(pool_id=pool_id, reader=reader, tags=[])
    shape.values[stand_in("limit")] = str(limit)
    checks = _checks_of(reader)

    def build() -> QuerySet[Any, Any]:
        columns = _check_columns(shape, checks)
        reached = admitted_within(
            pool_id=shape.pool_id,
            reader=shape.reader,
            room=Cast(Value(stand_in("limit")), BigIntegerField()),
            overhead=CONTEXT_LINE_OVERHEAD,
        )
        rows = reached.filter(columns.pop("shared")).annotate(**columns)
        return sealed_values(rows, "id", "content_length", "blocked", "content", *columns)

    rows = compiled(("context", shape.key, *checks), build).rows(shape.values)
    if not rows:
        return _UnlockedRead(None)
    seen = _other_rights(rows[0], reader)
    if seen is not None:
        return _UnlockedRead(None, rights=seen)
    visible = [row for row in rows if not row["blocked"]]
    chosen, ended = _fitting(((row["id"], row["content_length"]) for row in visible), limit)
    # Had the lines of all rows read left room, the next admitted entry would have been read.
    read_all = sum(row["content_length"] + CONTEXT_LINE_OVERHEAD for row in rows) < limit
    if not (ended or read_all or len(visible) == len(rows)):
        # A blocked entry left room for admitted entries the statement did not read.
        return _UnlockedRead(None)
    # [X5] An entry no key opens is left out; the room it leaves is not filled.
    opened = readable_rows(Entry, visible[: len(chosen)])
    return _UnlockedRead([(row["id"], row["content"]) for row in opened])


def has_entries(bot: Bot, reader: Reader) -> bool:
    """[S2] Whether any active entry is visible, even if none fits; decrypts nothing."""
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        reader = reader.as_of_now()
        return any_visible(pool_id=pool_id, reader=reader, active_only=True)


def validate_references(bot: Bot, reader: Reader, ids: list[str]) -> bool:
    """[S3] Whether a stored model answer naming `ids` may still be used: every entry (and,
    through the access rule, every source) is active and visible now; no content is read."""
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        reader = reader.as_of_now()
        wanted = set(ids)
        return wanted <= visible_ids(
            pool_id=pool_id, reader=reader, ids=list(wanted), active_only=True
        )


def change_log(
    *, pool_id: str, reader: Reader, since: int, limit: int | None = None
) -> tuple[list[dict[str, Any]], int, int | None]:
    """[A3, A10] Changes after version `since`, each with only the ids the reader may see now,
    and the version to read on from (None at the end).

    With a `limit`, the page covers the next `limit` changes of the log, so its cost grows
    with the page, not with the log; changes with no id for the reader are left out, so a
    page may hold fewer.
    """
    with pool_read(pool_id):
        reader = reader.as_of_now()
        in_page = Q(change__bot_id=pool_id, change__version__gt=since)
        next_since = None
        if limit is not None:
            versions = list(
                Change.objects.filter(bot_id=pool_id, version__gt=since)
                .order_by("version")
                .values_list("version", flat=True)[: limit + 1]
            )
            if len(versions) > limit:
                next_since = versions[limit - 1]
                in_page &= Q(change__version__lte=next_since)
        touched: dict[int, list[str]] = defaultdict(list)
        for change_id, entry_id in (
            ChangeEntry.objects.filter(in_page).order_by("id").values_list("change_id", "entry_id")
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
        return changes, pool_version(pool_id), next_since


@dataclass(frozen=True)
class LearningContext:
    """[W5] What a learning run shows the model about the pool."""

    # (id, content, topics) of the first valid entries in memory order the readers may see.
    entries: list[tuple[str, str, list[str]]]
    # Topic counts over all valid entries of the organization.
    topic_counts: dict[str, int]
    # [K5] The people (`from:` tags) of each of `entries` that has any, by entry id.
    people: dict[str, list[str]]


def learning_context(*, pool_id: str, reader: Reader, limit: int = 300) -> LearningContext:
    """[W5, V7] The first `limit` valid entries (active, every source provable) in memory
    order that the run's reader may see, and topic counts over every valid entry of the
    run's organization — deliberately narrower than the source document: see SPEC [W5]."""
    with pool_read(pool_id):
        reader = reader.as_of_now()
        ids = list(
            every_visible_entry(pool_id=pool_id, reader=reader, active_only=True).values_list(
                "id", flat=True
            )[:limit]
        )
        contents = _contents(ids)
        topics: dict[str, list[str]] = defaultdict(list)
        people: dict[str, list[str]] = defaultdict(list)
        for entry_id, tag, kind in EntryTag.objects.filter(
            entry_id__in=ids, kind__in=("topic", "from")
        ).values_list("entry_id", "tag", "kind"):
            if kind == "topic":
                topics[entry_id].append(tag)
            else:
                people[entry_id].append(tag.removeprefix("from:"))
        valid_in_org = valid_in_organization(
            pool_id=pool_id, organization_id=reader.organization_id
        )
        counts = dict(
            EntryTag.objects.filter(kind="topic", entry__in=valid_in_org)
            .values("tag")
            .annotate(count=Count("id"))
            .values_list("tag", "count")
        )
    return LearningContext(
        entries=[
            (entry_id, contents[entry_id], sorted(topics[entry_id]))
            for entry_id in ids
            if entry_id in contents  # [X5] an entry no key opens is left out
        ],
        topic_counts=counts,
        people={entry_id: sorted(found) for entry_id, found in people.items()},
    )


def pool_stats(*, pool_id: str) -> dict[str, Any]:
    """[O4] Counts of a pool's entries by layer, status and topic; reads no content [V8]."""
    with pool_read(pool_id):
        entries = Entry.objects.filter(bot_id=pool_id)
        layers = dict.fromkeys(Entry.Layer.values, 0) | dict(
            entries.values("layer").annotate(count=Count("id")).values_list("layer", "count")
        )
        statuses = dict.fromkeys(Entry.Status.values, 0) | dict(
            entries.values("status").annotate(count=Count("id")).values_list("status", "count")
        )
        topics = dict(
            EntryTag.objects.filter(bot_id=pool_id, kind="topic")
            .values("tag")
            .annotate(count=Count("id"))
            .order_by("tag")
            .values_list("tag", "count")
        )
        return {
            "version": pool_version(pool_id),
            "entries": sum(layers.values()),
            "layers": layers,
            "statuses": statuses,
            "topics": topics,
        }
