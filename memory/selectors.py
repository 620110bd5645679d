"""Reads of a memory pool, each under the pool's shared lock (or, for a full listing and a
`context` without a query, one statement that takes it if no change holds it and checks the
reader's rights in its own snapshot) and the access rule.

Server callers use `context`, `has_entries` and `validate_references`; they never load
a pool or check access one entry at a time themselves.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Count, Q

from memory.access import (
    Reader,
    any_visible,
    every_visible_entry,
    valid_in_organization,
    visible_entries,
    visible_ids,
    visible_in_order,
)
from memory.lock import pool_read
from memory.models import Change, ChangeEntry, Entry, EntryTag, Pool
from memory.relevance import relevant_in_order
from memory.rows import (
    DETAILS,
    ENTRY_FIELDS,
    fitting,
    opened_entries,
    with_details,
    with_tags_and_sources,
)
from memory.shapes import shape_of
from memory.unlocked import (
    all_for_reader,
    context_outside_the_lock,
    listing_outside_the_lock,
    outside_the_lock,
)
from openbot.fields import readable_values
from openbot.models import Bot

# The room, in characters, of the context enrichment offers the model: what a
# Remembered entry must fit (`memory.services.REMEMBER_MAX_CONTENT`).
ENRICHMENT_CONTEXT_LIMIT = 4000
T = TypeVar("T")


def pool_settings(pool_id: str) -> Pool:
    """The pool's settings; a pool nobody changed yet has the defaults (not stored)."""
    return Pool.objects.filter(bot_id=pool_id).first() or Pool(bot_id=pool_id)


def pool_version(pool_id: str) -> int:
    return Pool.objects.filter(bot_id=pool_id).values_list("version", flat=True).first() or 0


# A place in memory order: (rank, updatedAt, id) of the last entry of a page.
Position = tuple[int, int, str]


def entries_for_reader(
    *, pool_id: str, reader: Reader, tags: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """Entries for the reader, the history included, in memory order, and the version."""
    entries, version, _ = entry_page_for_reader(
        pool_id=pool_id, reader=reader, tags=tags, after=None, limit=None
    )
    return entries, version


def entry_page_for_reader(
    *, pool_id: str, reader: Reader, tags: list[str], after: Position | None, limit: int | None
) -> tuple[list[dict[str, Any]], int, Position | None]:
    """The reader's entries after `after` in memory order, at most `limit` of them
    (all without a limit), the version, and the position to read on from (None at the end)."""
    if after is None and limit is None:
        listing = outside_the_lock(
            reader,
            lambda guessed: listing_outside_the_lock(pool_id=pool_id, reader=guessed, tags=tags),
        )
        if listing is not None:
            listed, version = listing
            return listed, version, None
    with pool_read(pool_id):
        reader = reader.as_of_now()
        if after is None and limit is None:
            shape = shape_of(pool_id=pool_id, reader=reader, tags=tags)
            listed = all_for_reader(shape, checks=())
            version = listed[0]["pool_version"] if listed else pool_version(pool_id)
            return opened_entries(listed), version or 0, None
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
            # query; an entry no key opens is left out of it.
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


def entry_for_reader(*, pool_id: str, reader: Reader, entry_id: str) -> dict[str, Any] | None:
    """One entry's row (as `entry_row`) if the reader may see it (history included), else
    None; an entry no key opens is None too."""
    with pool_read(pool_id):
        reader = reader.as_of_now()
        entries = visible_entries(pool_id=pool_id, reader=reader, active_only=False)
        rows = readable_values(with_details(entries.filter(id=entry_id)), *ENTRY_FIELDS, *DETAILS)
        return with_tags_and_sources(rows)[0] if rows else None


def _contents(ids: list[str]) -> dict[str, tuple[str, int]]:
    """The content and saying time of each of `ids` that a key opens; decrypts exactly these
    entries."""
    return {
        row["id"]: (row["content"], row["said_at"])
        for row in readable_values(Entry.objects.filter(id__in=ids), "id", "content", "said_at")
    }


@dataclass(frozen=True)
class Context:
    """Text for the model and the ids of the entries in it."""

    text: str
    entry_ids: list[str]
    # The content of each entry in `entry_ids`, in the same order.
    contents: list[str]
    # When each was said (ms), in the same order [R8].
    said_at: list[int]


def context(bot: Bot, reader: Reader, limit: int, query: str | None = None) -> Context:
    """[S1] Active visible entries in memory order — with a `query`, those that match it, most
    relevant first — up to the first that does not fit `limit` characters; entries after
    it are not decrypted."""
    pool_id = bot.pool_bot_id
    contents = None
    if query is None:
        contents = outside_the_lock(
            reader,
            lambda guessed: context_outside_the_lock(pool_id=pool_id, reader=guessed, limit=limit),
        )
    if contents is None:
        with pool_read(pool_id):
            reader = reader.as_of_now()
            chosen, _ = fitting(
                visible_in_order(pool_id=pool_id, reader=reader, active_only=True)
                if query is None
                else relevant_in_order(pool_id=pool_id, reader=reader, query=query),
                limit,
            )
            opened = _contents(chosen)
        # An entry no key opens is left out; the room it leaves is not filled.
        contents = [(entry_id, *opened[entry_id]) for entry_id in chosen if entry_id in opened]
    return Context(
        text="".join(f"- {text}\n" for _, text, _ in contents),
        entry_ids=[entry_id for entry_id, _, _ in contents],
        contents=[text for _, text, _ in contents],
        said_at=[said_at for _, _, said_at in contents],
    )


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
    """Changes after version `since`, each with only the ids the reader may see now,
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
    """What a learning run shows the model about the pool."""

    # (id, content, topics, said at) of the first valid entries in memory order the readers
    # may see.
    entries: list[tuple[str, str, list[str], int]]
    # Topic counts over all valid entries of the organization.
    topic_counts: dict[str, int]
    # The people (`from:` tags) of each of `entries` that has any, by entry id.
    people: dict[str, list[str]]


def learning_context(*, pool_id: str, reader: Reader, limit: int = 300) -> LearningContext:
    """[W5] The first `limit` valid entries (active, every source provable) in memory order
    that the run's reader may see, and topic counts over every valid entry of the run's
    organization. Deliberately narrower than the source document: no check can prove which
    inputs shaped a model's answer, so the model sees nothing the people of the chat may not."""
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
            (entry_id, contents[entry_id][0], sorted(topics[entry_id]), contents[entry_id][1])
            for entry_id in ids
            if entry_id in contents  # an entry no key opens is left out
        ],
        topic_counts=counts,
        people={entry_id: sorted(found) for entry_id, found in people.items()},
    )


def pool_stats(*, pool_id: str) -> dict[str, Any]:
    """Counts of a pool's entries by layer, status and topic; reads no content."""
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
