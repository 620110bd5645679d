"""The access rule [V1–V10]: the only code that answers "may this reader see this entry".

A reader is a person reading in an organization, or a reader circle (a channel group, the
readers of an answer in a group chat). Reader X may see entry E iff E is structurally sound
(`Entry.sound`: every reachable source exists, is active and carries evidence, no cycle is
reachable — derived on write by memory.graph) and E *and every entry it depends on* (the
`Closure` rows of E, itself included) passes the local rule:

- (a) the reader is not excluded from it — for a channel circle, no current member of the
  channel is: Forget is "no longer for you", and you read the group's answers too;
- (b) every `org:` tag equals the reader's organization;
- (c) some `for:` tag admits the reader;
- (d) every evidence rule is one the reader satisfies now, in the reader's organization.

[V8] The query reads tags, source references, evidence and exclusions only: content stays
deferred and is decrypted only for the rows a caller returns. Channel membership is read at
the moment of the read. [V9] This proves access to the sources the memory bot named; it
cannot prove that a model named every input that shaped its answer.

One local rule (`_failing_locally`) reads (b) and (d) in the entry's own row (`org_scope`,
`rule_scope`, written with the entry), and the tags or evidence themselves only where the row
holds several. An entry's closure is read only if it names a source entry (`depends`): each
row on its own (`visible_entries`, for reads of a few entries), or looked up in the set of
admitted entries that pass (`every_visible_entry`, for reads that check them all).
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Window,
)
from django.db.models.expressions import RowRange

from memory.models import SCOPE_MANY, Closure, Entry, EntryTag, Evidence, Exclusion
from memory.rights import rights_guess, rights_of
from memory.shapes import shape_of
from openbot.compiled import compiled
from openbot.models import Bot, ChannelMember


@dataclass(frozen=True)
class Reader:
    """Who reads: a person (`person_id`) or a channel group (`circle_id`), in an organization."""

    organization_id: str
    person_id: str | None = None
    circle_id: str | None = None
    # The channels the person is in now; for a circle, the circle itself.
    channel_ids: frozenset[str] = frozenset()
    # A current user of the bot; a circle reads through its group chat and admits for:bot.
    bot_user: bool = False
    # The bot a person reads through, so that their rights can be read again.
    bot: Bot | None = field(default=None, compare=False, repr=False)

    @classmethod
    def person(cls, *, bot: Bot, person_id: str, organization_id: str) -> "Reader":
        """A person reading `bot`'s memory in `organization_id`, with membership as of now."""
        return cls(organization_id=organization_id, person_id=person_id, bot=bot).as_of_now()

    def as_of_now(self) -> "Reader":
        """[L1] This reader with channel membership and use of the bot read again now.

        Reads and changes call it once they hold the pool's lock. Content changes commit under
        the exclusive lock, so rights read after the lock is taken are never older than any
        content the read shows: a person who left a channel before new content was added never
        sees that content together with what the channel gave them. Rights read before the lock
        (when the reader was built) could be, unless the read checks them in its own snapshot
        (a full listing, a context without a query: `as_guessed`).
        """
        return self._with_rights(rights_of)

    def as_guessed(self) -> "Reader":
        """This reader with the rights last read for them in this process (`as_of_now` the first
        time): a guess, only for a read that checks it in its own snapshot."""
        return self._with_rights(rights_guess)

    def _with_rights(self, read: Callable[..., tuple[Iterable[str], bool]]) -> "Reader":
        """This reader with the rights `read` gives a person reading through a bot; others
        have none to read."""
        if self.person_id is None or self.bot is None:
            return self
        channel_ids, bot_user = read(
            bot=self.bot, person_id=self.person_id, organization_id=self.organization_id
        )
        return replace(self, channel_ids=frozenset(channel_ids), bot_user=bot_user)

    @classmethod
    def circle(cls, *, channel_id: str, organization_id: str) -> "Reader":
        """[N2] The readers of an answer in a group chat: only `for:channel:<c>` and `for:bot`."""
        return cls(
            organization_id=organization_id,
            circle_id=channel_id,
            channel_ids=frozenset([channel_id]),
            bot_user=True,
        )

    @property
    def rules(self) -> list[str]:
        """The evidence rules this reader satisfies now."""
        rules = [f"channel:{channel}" for channel in sorted(self.channel_ids)]
        if self.person_id is not None:
            rules.append(f"person:{self.person_id}")
        return rules

    @property
    def for_tags(self) -> list[str]:
        """The `for:` tags that admit this reader."""
        tags = [f"for:channel:{channel}" for channel in sorted(self.channel_ids)]
        if self.person_id is not None:
            tags.append(f"for:person:{self.person_id}")
        if self.bot_user:
            tags.append("for:bot")
        return tags


def _foreign_org(entry: OuterRef, organization_id: str) -> QuerySet[EntryTag]:
    """The `org:` tags of `entry` that name another organization."""
    return EntryTag.objects.filter(entry_id=entry, kind="org").exclude(tag=f"org:{organization_id}")


def valid_in_organization(*, pool_id: str, organization_id: str) -> QuerySet[Entry]:
    """Valid entries of the pool (active, every source provable) that work in the
    organization may use: what learning's topic counts cover — not any one reader's view."""
    return Entry.objects.filter(bot_id=pool_id, sound=True, status=Entry.Status.ACTIVE).exclude(
        Exists(_foreign_org(OuterRef("pk"), organization_id))
    )


def _failing_locally(reader: Reader, entry: OuterRef, prefix: str = "") -> Q:
    """Whether an entry fails the local rule for `reader` other than by its admission: (a) an
    exclusion, (b) a foreign `org:` tag, (d) an unmet evidence rule.

    The entry's row (its fields under `prefix`) holds its `org:` tags and its evidence in one
    value each: only where it has several are its tags or evidence read (`entry` is its
    id, as its exclusions are)."""
    org_scope, rule_scope = f"{prefix}org_scope", f"{prefix}rule_scope"
    own_org = Q(**{f"{org_scope}__in": ["", reader.organization_id]})
    rules = [f"{reader.organization_id} {rule}" for rule in reader.rules]
    met_rule = Q(**{f"{rule_scope}__in": ["", *rules]})
    foreign_org = _foreign_org(entry, reader.organization_id)
    unmet_evidence = Evidence.objects.filter(entry_id=entry).exclude(
        organization_id=reader.organization_id, rule__in=reader.rules
    )
    # The tags or evidence are read only where the row holds several: PostgreSQL leaves
    # the second arm of an AND unevaluated where the first is false (as the plans show; the
    # order is not promised, and evaluating it would give the same answer).
    failing = ~own_org & (~Q(**{org_scope: SCOPE_MANY}) | Q(Exists(foreign_org)))
    failing |= ~met_rule & (~Q(**{rule_scope: SCOPE_MANY}) | Q(Exists(unmet_evidence)))
    if reader.person_id is not None:
        excluded = Exclusion.objects.filter(entry_id=entry, person_id=reader.person_id)
        failing |= Q(Exists(excluded))
    if reader.circle_id is not None:
        # [V10] Members as of this read: someone who joins later and had taken their part
        # back hides the entry from the group from then on.
        members = ChannelMember.objects.filter(channel_id=reader.circle_id).values("person_id")
        failing |= Q(Exists(Exclusion.objects.filter(entry_id=entry, person_id__in=members)))
    return failing


def _admitting(reader: Reader, entry: OuterRef) -> QuerySet[EntryTag]:
    """The `for:` tags of `entry` that admit `reader`, looked up by the entry."""
    return EntryTag.objects.filter(entry_id=entry, tag__in=reader.for_tags)


def _failing_sources(reader: Reader, entry: OuterRef) -> QuerySet[Closure]:
    """Closure rows of `entry` but its own whose entry is not admitted for `reader` or fails
    the local rule."""
    ancestor = OuterRef("ancestor_id")
    admitted = _admitting(reader, ancestor)
    failing = Entry.objects.filter(id=ancestor).filter(_failing_locally(reader, OuterRef("pk")))
    return (
        Closure.objects.filter(entry_id=entry)
        .exclude(ancestor_id=entry)
        .filter(~Exists(admitted) | Exists(failing))
    )


def _blocked(reader: Reader, entry: OuterRef, prefix: str = "") -> Q:
    """Whether an admitted entry is hidden from `reader`: it fails the local rule (read in its
    row, its fields under `prefix`; `entry` is its id), or it depends on an entry that is not
    admitted or fails it. The closure of an entry that names no source entry is itself
    alone: it is not read."""
    depends = Q(**{f"{prefix}depends": True}) & Q(Exists(_failing_sources(reader, entry)))
    return _failing_locally(reader, entry, prefix) | depends


def _passing(*, pool_id: str, reader: Reader) -> QuerySet[EntryTag, str]:
    """Ids of the pool's entries that pass the local rule for `reader`: admitted by a `for:`
    tag and failing nothing else. A source in another pool counts as missing, so every
    dependency of a sound entry is in the pool; an entry's tags carry its pool's id."""
    return (
        EntryTag.objects.filter(bot_id=pool_id, tag__in=reader.for_tags)
        .exclude(_failing_locally(reader, OuterRef("entry_id"), prefix="entry__"))
        .values_list("entry_id", flat=True)
    )


def _usable(*, active_only: bool, prefix: str = "") -> Q:
    """Sound, and active for active use [V6]; for the history view, anything not retracted."""
    sound = Q(**{f"{prefix}sound": True})
    if active_only:
        return sound & Q(**{f"{prefix}status": Entry.Status.ACTIVE})
    return sound & ~Q(**{f"{prefix}status": Entry.Status.RETRACTED})


# [E6] Memory order: pinned first, then the most recently updated, then by id.
MEMORY_ORDER = ("rank", "-updated_at", "id")


def admitted_entries(*, pool_id: str, reader: Reader, active_only: bool) -> QuerySet[Entry]:
    """Entries of the pool with a `for:` tag that admits `reader`, in memory order:
    the candidates of `visible_entries` and `every_visible_entry`, before their dependencies
    are checked.

    The admitted `for:` tag drives the query from the (pool, tag) index, so the cost grows
    with what the reader may see, not with the pool [Q1].
    """
    candidates = EntryTag.objects.filter(
        bot_id=pool_id, tag__in=reader.for_tags, entry_id=OuterRef("pk")
    )
    return (
        Entry.objects.filter(_usable(active_only=active_only), bot_id=pool_id)
        .filter(Exists(candidates))
        .defer("content")
        .order_by(*MEMORY_ORDER)
    )


def blocked(reader: Reader) -> ExpressionWrapper:
    """Whether the outer entry fails the local rule for `reader` or depends on an entry that
    does (or is not admitted): an admitted entry is visible unless it is blocked [V4]."""
    return ExpressionWrapper(_blocked(reader, OuterRef("pk")), output_field=BooleanField())


def visible_entries(*, pool_id: str, reader: Reader, active_only: bool) -> QuerySet[Entry]:
    """Entries of the pool `reader` may see, content deferred, in memory order.

    `active_only` is active use (context, enrichment, learning, has_entries); otherwise
    the history view: `invalidated` entries that pass the rule are included, `retracted` never.
    """
    return admitted_entries(pool_id=pool_id, reader=reader, active_only=active_only).exclude(
        _blocked(reader, OuterRef("pk"))
    )


def visible_among(*, pool_id: str, reader: Reader, ids: Any) -> QuerySet[Entry]:
    """The entries of `ids` (a subquery of a few of the pool's entries) that `reader` may see
    for active use, content deferred, unordered.

    Each is checked by its own rows: its admitting `for:` tag is looked up by the entry, not
    in the pool's (pool, tag) index, so that no plan, with planner statistics or without,
    reads the pool's tag rows for every entry: the cost follows `ids`, not the pool [R7].
    """
    return (
        Entry.objects.filter(_usable(active_only=True), bot_id=pool_id, id__in=ids)
        .filter(Exists(_admitting(reader, OuterRef("pk"))))
        .exclude(_blocked(reader, OuterRef("pk")))
        .defer("content")
    )


def every_visible_entry(*, pool_id: str, reader: Reader, active_only: bool) -> QuerySet[Entry]:
    """`visible_entries`, for reads that check every admitted entry (a listing, whole or by
    page; learning's context) rather than a few of them.

    Each admitted entry's local rule is checked in its own row, and its dependencies, if it
    names a source entry (`depends`), are looked up among the admitted entries that pass
    (hashed once on PostgreSQL, while the set fits in `work_mem`), rather than checked again
    for every closure row that names them. That is one entry row per admitted entry for the
    set, and a closure probe only for the entries that depend on others and pass their own
    rule. For a few entries (by id, a search's candidates, `context`'s windows) the set
    costs more than it saves.
    """
    itself = OuterRef("pk")
    failing = (
        Closure.objects.filter(entry_id=itself)
        .exclude(ancestor_id=itself)
        .exclude(ancestor_id__in=_passing(pool_id=pool_id, reader=reader))
    )
    # The first failing dependency's id, none if they pass (`ancestor_id` is never null): as
    # `NOT EXISTS`, PostgreSQL turned it into a hash join over the pool's whole closure. It is
    # not looked up for an entry that names no source entry (the OR's second arm).
    first_failing = Subquery(failing.values("ancestor_id")[:1])
    return (
        admitted_entries(pool_id=pool_id, reader=reader, active_only=active_only)
        .exclude(_failing_locally(reader, itself))
        .alias(first_failing=first_failing)
        .filter(Q(depends=False) | Q(first_failing__isnull=True))
    )


def any_visible(*, pool_id: str, reader: Reader, active_only: bool) -> bool:
    """Whether `reader` may see any entry of the pool, without reading content.

    Driven from the rows of the admitting `for:` tags, not from the entries: a query that
    stops at its first match would otherwise walk the pool's entries, and a reader who sees
    nothing would pay for all of them. Compiled once per reader shape.
    """
    shape = shape_of(pool_id=pool_id, reader=reader)

    def build() -> QuerySet[Any, Any]:
        admissions = EntryTag.objects.filter(
            bot_id=shape.pool_id, tag__in=shape.reader.for_tags
        ).filter(_usable(active_only=active_only, prefix="entry__"))
        hidden = _blocked(shape.reader, OuterRef("entry_id"), prefix="entry__")
        return admissions.exclude(hidden).values("entry_id")[:1]

    return bool(compiled(("any_visible", active_only, shape.key), build).rows(shape.values))


def admitted_within(*, pool_id: str, reader: Reader, room: Any, overhead: int) -> QuerySet[Entry]:
    """The admitted entries for active use whose line (content length plus `overhead`)
    would start within `room` characters if every admitted entry before it were shown, in
    memory order, each with `blocked`: the entries a read that stops at `room` may reach, in
    one statement. Only these are checked; the sort of the admitted entries takes one
    index-only step each. `room` is an expression (a compiled query's stand-in)."""
    line = F("content_length") + overhead
    # Where each admitted entry's line would start if every one before it were shown.
    start = Window(Sum(line), order_by=MEMORY_ORDER, frame=RowRange(end=0)) - line
    admitted = admitted_entries(pool_id=pool_id, reader=reader, active_only=True)
    reached = admitted.annotate(start=start).filter(start__lt=room).values("id")
    return (
        Entry.objects.filter(id__in=reached)
        .annotate(blocked=blocked(reader))
        .order_by(*MEMORY_ORDER)
    )


def visible_in_order(
    *, pool_id: str, reader: Reader, active_only: bool
) -> Iterator[tuple[str, int]]:
    """(id, content length) of the entries `reader` may see, in memory order, for callers that
    stop early (context); read it under the pool's lock.

    Ordering the admitted entries is cheap (one index-only step each); checking their
    dependencies is not. So the admitted entries are read in growing windows and only the
    windows a caller reaches are checked, rather than checking every admitted entry and then
    sorting what passes. The window is admitted already (the pool's lock keeps it so):
    only `blocked` is left to check, in the window's own query; PostgreSQL evaluates it after
    the sort and limit, for the window's rows only. Each window's query is compiled once per
    reader shape.
    """
    shape = shape_of(pool_id=pool_id, reader=reader)
    # The first window; each next one is twice the one before.
    start, size = 0, 32
    while True:

        def build(start: int = start, size: int = size) -> QuerySet[Any, Any]:
            admitted = admitted_entries(
                pool_id=shape.pool_id, reader=shape.reader, active_only=active_only
            )
            checked = admitted.annotate(blocked=blocked(shape.reader))
            return checked.values("id", "content_length", "blocked")[start : start + size]

        key = ("visible_in_order", active_only, start, size, shape.key)
        window = compiled(key, build).rows(shape.values)
        yield from ((row["id"], row["content_length"]) for row in window if not row["blocked"])
        if len(window) < size:
            return
        start += size
        size *= 2


def visible_ids(*, pool_id: str, reader: Reader, ids: list[str], active_only: bool) -> set[str]:
    """Which of `ids` the reader may see, without reading content."""
    return set(
        visible_entries(pool_id=pool_id, reader=reader, active_only=active_only)
        .filter(id__in=ids)
        .values_list("id", flat=True)
    )


def audience_allowed(*, source_ids: list[str], audience: str) -> bool:
    """[V5] Whether a `for:` audience satisfies the rule of every source, transitively.

    `for:person:<u>` needs every evidence rule to be `person:<u>` or a channel `u` is in now;
    `for:channel:<c>` needs every rule to be `channel:<c>`; `for:bot` satisfies no evidence
    rule, so it is allowed only where there is none. A source that does not exist proves
    nothing, so no audience is allowed over it (nor over no sources at all).
    """
    known = set(Entry.objects.filter(id__in=source_ids).values_list("id", flat=True))
    if not source_ids or set(source_ids) - known:
        return False
    ancestors = Closure.objects.filter(entry_id__in=source_ids).values("ancestor_id")
    rules = set(Evidence.objects.filter(entry_id__in=ancestors).values_list("rule", flat=True))
    if audience.startswith("for:channel:"):
        return rules <= {f"channel:{audience.removeprefix('for:channel:')}"}
    if audience.startswith("for:person:"):
        person_id = audience.removeprefix("for:person:")
        channels = [rule.removeprefix("channel:") for rule in rules if rule.startswith("channel:")]
        member_of = ChannelMember.objects.filter(person_id=person_id, channel_id__in=channels)
        allowed = {f"person:{person_id}"} | {
            f"channel:{channel_id}" for channel_id in member_of.values_list("channel_id", flat=True)
        }
        return rules <= allowed
    return audience == "for:bot" and not rules
