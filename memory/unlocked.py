"""The fast read path: a full listing, or `context` without a query, read in one statement
outside the pool's lock, which stands only if the statement's own checks say so [L1, Q4].

Why such a read is right: a statement sees one snapshot. It reads entries only if it takes the
pool's lock shared in that statement (`shared_in_statement`), so no change is under way in its
snapshot; and it reads the person's rights again as a column of the same statement
(`memory.rights.rights_seen`), so it can tell whether the rights the statement was built with
(guessed from the last read in this process, `Reader.as_guessed`) are still theirs there. If
the rights differ, it is read once more with the rights it saw; if the lock was held, or the
reader's rights cannot be read in a statement, the caller reads under `pool_read`, which waits
for the change. A guess is never an answer: a read built on a wrong one does not stand.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from django.db.models import BigIntegerField, Exists, QuerySet, Subquery, Value
from django.db.models.functions import Cast

from memory.access import Reader, admitted_within, every_visible_entry
from memory.lock import pool_key, shared_in_statement
from memory.models import Entry, Pool
from memory.rights import rights_in, rights_seen
from memory.rows import (
    CONTEXT_LINE_OVERHEAD,
    DETAILS,
    ENTRY_FIELDS,
    fitting,
    opened_entries,
    with_details,
)
from memory.shapes import Shape, shape_of, tag_stand_ins
from openbot.compiled import compiled, stand_in
from openbot.fields import readable_rows, sealed_values
from openbot.models import Bot

T = TypeVar("T")


@dataclass(frozen=True)
class UnlockedRead(Generic[T]):
    """A read of one statement outside the pool's lock: what it found if it stands (`found`
    is None if not), and the rights its statement saw if they were not the reader's."""

    found: T | None
    rights: tuple[frozenset[str], bool] | None = None


def outside_the_lock(reader: Reader, read: Callable[[Reader], UnlockedRead[T]]) -> T | None:
    """What `read` finds outside the pool's lock with the reader's rights as last
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
    """The columns of `checks`: whether the statement took the pool's lock shared
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
    """The checks of a read outside the pool's lock: the person's rights too, for a person
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


def listing_outside_the_lock(
    *, pool_id: str, reader: Reader, tags: list[str]
) -> UnlockedRead[tuple[list[dict[str, Any]], int]]:
    """Every entry of `entries_for_reader` and the version in one statement, which
    stands if its checks say so; nothing is decrypted before. It reads no entry unless it took
    the lock; an empty answer has no row for the checks, so one more statement reads them with
    whether the reader sees anything."""
    shape = _shape_with_checks(pool_id=pool_id, reader=reader, tags=tags)
    checks = _checks_of(reader)
    rows = all_for_reader(shape, checks=checks)
    head = rows[0] if rows else _nothing_for_reader(shape, checks=checks)
    if head is None:
        return UnlockedRead(None)
    seen = _other_rights(head, reader)
    if seen is not None:
        return UnlockedRead(None, rights=seen)
    if not rows and not (head["shared"] and head["nothing"]):
        return UnlockedRead(None)
    version = head["pool_version"] or 0
    return UnlockedRead((opened_entries(rows), version))


def _filtered(shape: Shape) -> QuerySet[Entry]:
    """The listing's entries for the shape's stand-in reader and tags."""
    entries = every_visible_entry(pool_id=shape.pool_id, reader=shape.reader, active_only=False)
    for tag in tag_stand_ins(shape):
        entries = entries.filter(tag_rows__tag=tag)
    return entries


def _version(shape: Shape) -> Subquery:
    return Subquery(Pool.objects.filter(bot_id=shape.pool_id).values("version")[:1])


def all_for_reader(shape: Shape, *, checks: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every entry of `entries_for_reader` with the version and `checks` in each row, sealed,
    in one statement compiled once per reader shape. Every visible entry is in the
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


def context_outside_the_lock(
    *, pool_id: str, reader: Reader, limit: int
) -> UnlockedRead[list[tuple[str, str, int]]]:
    """`context` without a query in one statement, which stands if its checks say
    so: (id, content, said at) of the entries chosen, decrypting only them.

    It reads the admitted entries whose line would start within `limit` if every admitted
    entry before it were shown, with their sealed content, and checks only those (`blocked`):
    the sort of the admitted entries takes one index-only step each, the check is the cost.
    A blocked entry among them leaves room for entries after them; if the context has not
    ended by then and admitted entries are left, it is read under the pool's lock, as
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
        return sealed_values(
            rows, "id", "content_length", "blocked", "content", "said_at", *columns
        )

    rows = compiled(("context", shape.key, *checks), build).rows(shape.values)
    if not rows:
        return UnlockedRead(None)
    seen = _other_rights(rows[0], reader)
    if seen is not None:
        return UnlockedRead(None, rights=seen)
    visible = [row for row in rows if not row["blocked"]]
    chosen, ended = fitting(((row["id"], row["content_length"]) for row in visible), limit)
    # Had the lines of all rows read left room, the next admitted entry would have been read.
    read_all = sum(row["content_length"] + CONTEXT_LINE_OVERHEAD for row in rows) < limit
    if not (ended or read_all or len(visible) == len(rows)):
        # A blocked entry left room for admitted entries the statement did not read.
        return UnlockedRead(None)
    # An entry no key opens is left out; the room it leaves is not filled.
    opened = readable_rows(Entry, visible[: len(chosen)])
    return UnlockedRead([(row["id"], row["content"], row["said_at"]) for row in opened])
