"""[O6] Why a reader may or may not see an entry, for support staff.

For a reader and an entry, walk the entry's source references and report, for the entry and for
every entry it depends on, the first clause of [V4] that fails there — in this order:

- `excluded`: (a) the reader took their part back (Forget); for a channel circle, a current
  member of the channel did;
- `org`: (b) an `org:` tag names another organization;
- `not_admitted`: (c) no `for:` tag admits the reader;
- `missing_evidence`: (d) a source item of a fact, or a pinned entry's author, has no evidence;
- `evidence:<rule>`: (d) the reader does not satisfy that evidence rule now, in the reader's
  organization;
- `not_active`: (a) the entry itself is retracted (or, in active use, not active); (e) a
  source is not active;
- `missing_source`: (e) a source entry that does not exist (reported on that id, `via` the entry
  naming it), or an observation that names none;
- `cycle`: (e) the entry lies on a cycle of source references.

`visible` is the access module's own answer (`visible_ids`, the function every read uses); the
clauses are read from the same metadata that rule reads — tags, source references, evidence,
exclusions, status and the reader's `for:` tags and rules — and never from derived data, so the
tests can hold the two to agree: visible exactly when no dependency fails. Nothing here reads
content.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memory.access import Reader, visible_ids
from memory.graph import components
from memory.lock import pool_read
from memory.models import Entry, EntrySource, EntryTag, Evidence, Exclusion
from openbot.errors import NotFound, invalid
from openbot.models import Bot, Channel, ChannelMember

# What each clause code means, for people reading an explanation (the admin shows these).
CLAUSES = {
    "excluded": "(a) the reader took back their part of it (Forget); for a channel, a current "
    "member of the channel did",
    "org": "(b) an org: tag names another organization",
    "not_admitted": "(c) no for: tag admits the reader",
    "missing_evidence": "(d) a source item, or a pinned entry's author, has no evidence record",
    "evidence": "(d) the reader does not satisfy this evidence rule now, in this organization",
    "not_active": "(a, e) retracted, or a source that is not active",
    "missing_source": "(e) a source entry that does not exist, or an observation with none",
    "cycle": "(e) its source references lead back to itself",
}


@dataclass(frozen=True)
class Dependency:
    """The entry or one it depends on; `failing` is its first failing clause, or None."""

    entry_id: str
    # The entry that names this one as a source; None for the entry explained.
    via: str | None
    layer: str | None
    status: str | None
    failing: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry_id,
            "via": self.via,
            "layer": self.layer,
            "status": self.status,
            "failing": self.failing,
        }


@dataclass(frozen=True)
class Explanation:
    entry_id: str
    reader: Reader
    active_only: bool
    visible: bool
    dependencies: list[Dependency]

    def to_json(self) -> dict[str, Any]:
        reader: dict[str, str] = {"organization": self.reader.organization_id}
        if self.reader.person_id is not None:
            reader["person"] = self.reader.person_id
        if self.reader.circle_id is not None:
            reader["channel"] = self.reader.circle_id
        return {
            "entry": self.entry_id,
            "reader": reader,
            "use": "active" if self.active_only else "read",
            "visible": self.visible,
            "dependencies": [dependency.to_json() for dependency in self.dependencies],
        }


def reader_for(*, bot: Bot, person_id: str | None = None, channel_id: str | None = None) -> Reader:
    """The reader to explain for: a person reading through `bot` (in the bot's organization;
    `explain_entries` reads their rights as of the explanation), or the circle of a channel of
    that organization."""
    if (person_id is None) == (channel_id is None):
        raise invalid("reader", "give a person or a channel")
    if person_id is not None:
        return Reader(organization_id=bot.organization_id, person_id=person_id, bot=bot)
    channel = Channel.objects.filter(id=channel_id).first()
    if channel is None:
        raise invalid("channel", f"no channel with id {channel_id!r}")
    if channel.organization_id != bot.organization_id:
        raise invalid("channel", "the channel is in another organization than the bot")
    return Reader.circle(channel_id=channel.id, organization_id=channel.organization_id)


def explain_access(
    *, pool_id: str, reader: Reader, entry_id: str, active_only: bool = False
) -> Explanation:
    """Whether `reader` may see `entry_id`, and the first failing clause of the rule on each
    entry it depends on; `active_only` is active use, otherwise the history view of GET memory."""
    return explain_entries(
        pool_id=pool_id, reader=reader, entry_ids=[entry_id], active_only=active_only
    )[0]


def explain_entries(
    *, pool_id: str, reader: Reader, entry_ids: list[str], active_only: bool = False
) -> list[Explanation]:
    """`explain_access` for several entries of a pool at once, in one reading of the pool."""
    with pool_read(pool_id):  # one consistent view for the answer and its explanation
        reader = reader.as_of_now()
        rows, sources = _dependency_graph(pool_id, set(entry_ids))
        unknown = [entry_id for entry_id in entry_ids if entry_id not in rows]
        if unknown:
            raise NotFound(f"entry {unknown[0]} not found in pool {pool_id}")
        visible = visible_ids(
            pool_id=pool_id, reader=reader, ids=entry_ids, active_only=active_only
        )
        tags, evidence, excluded = _metadata(rows, reader)
    on_cycles = _on_cycles({key: [row.source for row in sources[key]] for key in rows})
    explanations = []
    for entry_id in entry_ids:
        dependencies: list[Dependency] = []
        for key, via in _walk(entry_id, rows, sources):
            if key not in rows:
                dependencies.append(Dependency(key, via, None, None, "missing_source"))
                continue
            layer, status = rows[key]
            failing = _first_failing(
                reader,
                layer=layer,
                status=status,
                root=via is None,
                active_only=active_only,
                tags=tags[key],
                sources=sources[key],
                evidence=evidence[key],
                excluded=key in excluded,
                on_cycle=key in on_cycles,
            )
            dependencies.append(Dependency(key, via, layer, status, failing))
        explanations.append(
            Explanation(entry_id, reader, active_only, entry_id in visible, dependencies)
        )
    return explanations


@dataclass(frozen=True)
class _Source:
    source: str | None
    chat_id: str | None
    item_seq: int | None


@dataclass(frozen=True)
class _Evidence:
    rule: str
    organization_id: str
    chat_id: str | None
    item_seq: int | None


def _dependency_graph(
    pool_id: str, entry_ids: set[str]
) -> tuple[dict[str, tuple[str, str]], dict[str, list[_Source]]]:
    """(layer, status) of the entries and every existing entry of the pool they reach through
    source references, and the sources of each, one level per pair of queries."""
    rows: dict[str, tuple[str, str]] = {}
    sources: dict[str, list[_Source]] = defaultdict(list)
    looked_up: set[str] = set()
    frontier = entry_ids
    while frontier:
        looked_up |= frontier
        found = {
            key: (layer, status)
            for key, layer, status in Entry.objects.filter(
                bot_id=pool_id, id__in=frontier
            ).values_list("id", "layer", "status")
        }
        rows.update(found)
        for key, source, chat_id, item_seq in (
            EntrySource.objects.filter(entry_id__in=found)
            .order_by("entry_id", "position")
            .values_list("entry_id", "source_entry_id", "chat_id", "item_seq")
        ):
            sources[key].append(_Source(source, chat_id, item_seq))
        named = {row.source for key in found for row in sources[key] if row.source is not None}
        frontier = named - looked_up
    return rows, sources


def _metadata(
    rows: dict[str, tuple[str, str]], reader: Reader
) -> tuple[dict[str, set[str]], dict[str, list[_Evidence]], set[str]]:
    """The `org:`/`for:` tags and the evidence of each entry, and the entries the reader is
    excluded from."""
    tags: dict[str, set[str]] = defaultdict(set)
    for key, tag in EntryTag.objects.filter(entry_id__in=rows, kind__in=["org", "for"]).values_list(
        "entry_id", "tag"
    ):
        tags[key].add(tag)
    evidence: dict[str, list[_Evidence]] = defaultdict(list)
    for key, rule, organization_id, chat_id, item_seq in Evidence.objects.filter(
        entry_id__in=rows
    ).values_list("entry_id", "rule", "organization_id", "chat_id", "item_seq"):
        evidence[key].append(_Evidence(rule, organization_id, chat_id, item_seq))
    exclusions = Exclusion.objects.filter(entry_id__in=rows)
    if reader.person_id is not None:
        exclusions = exclusions.filter(person_id=reader.person_id)
    else:
        # A circle: any current member of the channel.
        members = ChannelMember.objects.filter(channel_id=reader.circle_id).values("person_id")
        exclusions = exclusions.filter(person_id__in=members)
    return tags, evidence, set(exclusions.values_list("entry_id", flat=True))


def _first_failing(
    reader: Reader,
    *,
    layer: str,
    status: str,
    root: bool,
    active_only: bool,
    tags: set[str],
    sources: list[_Source],
    evidence: list[_Evidence],
    excluded: bool,
    on_cycle: bool,
) -> str | None:
    """The first clause of the access rule one entry fails for `reader`, in the order of the
    module's docstring; None when it passes them all."""
    if excluded:
        return "excluded"
    if any(tag.startswith("org:") and tag != f"org:{reader.organization_id}" for tag in tags):
        return "org"
    if not tags & set(reader.for_tags):
        return "not_admitted"
    items = {(row.chat_id, row.item_seq) for row in sources if row.source is None}
    proven = {(row.chat_id, row.item_seq) for row in evidence}
    if (layer == Entry.Layer.PINNED and not evidence) or (
        layer == Entry.Layer.FACT and not (items and items <= proven)
    ):
        return "missing_evidence"
    rules = set(reader.rules)
    unmet = sorted(
        row.rule
        for row in evidence
        if row.organization_id != reader.organization_id or row.rule not in rules
    )
    if unmet:
        return f"evidence:{unmet[0]}"
    # (a) the entry itself is not retracted, and active in active use; (e) sources active.
    if status == Entry.Status.RETRACTED or (
        status != Entry.Status.ACTIVE and (active_only or not root)
    ):
        return "not_active"
    if layer == Entry.Layer.OBSERVATION and not any(row.source for row in sources):
        return "missing_source"
    if on_cycle:
        return "cycle"
    return None


def _walk(
    entry_id: str, rows: dict[str, tuple[str, str]], sources: dict[str, list[_Source]]
) -> Iterable[tuple[str, str | None]]:
    """(entry, the entry naming it) for the entry and everything it reaches, each once,
    breadth first."""
    seen = {entry_id}
    queue: list[tuple[str, str | None]] = [(entry_id, None)]
    for key, via in queue:
        yield key, via
        for row in sources.get(key, []) if key in rows else []:
            if row.source is not None and row.source not in seen:
                seen.add(row.source)
                queue.append((row.source, key))


def _on_cycles(references: dict[str, list[str | None]]) -> set[str]:
    """The nodes of `references` that lie on a cycle: those of a strongly connected component
    of more than one node, or with an edge to itself."""
    sources = {key: [s for s in named if s is not None] for key, named in references.items()}
    return {
        member
        for component in components(sources)
        for member in component
        if len(component) > 1 or member in sources[member]
    }
