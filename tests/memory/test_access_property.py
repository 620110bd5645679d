"""[V4] The access rule against a plain, recursive reference written here.

Hypothesis builds random pools through the real services — facts from private and group chats,
pinned entries, observations over them, imports from older versions with cycles, missing
sources and missing evidence, invalidations, retractions, Forget, channel membership changes,
entries of another organization, purges — while the test keeps its own in-memory model of the
pool. Then, for every reader (each person in each of their organizations, each channel
circle), the visible set from `visible_entries` and from `every_visible_entry` must equal what
the reference computes from that model: [V4] (a)–(e) read literally, never the derived
`Closure`/`sound` columns.

Examples: `OPENBOT_ACCESS_EXAMPLES` (default 1,000 on PostgreSQL, 200 on SQLite).
"""

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import QuerySet
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memory.access import Reader, audience_allowed, every_visible_entry, visible_entries
from memory.forgetting import entry_forget, pool_purge
from memory.models import Change, Entry
from memory.rows import CONTEXT_LINE_OVERHEAD
from memory.selectors import (
    context,
    entries_for_reader,
    entry_page_for_reader,
    validate_references,
)
from memory.services import (
    ImportedEntry,
    ItemEvidence,
    entries_import,
    entry_create_in,
    entry_remember,
    entry_set_status_in,
    pool_change,
)
from memory.shapes import shape_of
from openbot import services
from openbot.compiled import compiled
from openbot.errors import Conflict
from openbot.models import Bot, Channel, ChannelMember, Grant, Organization, Person

EXAMPLES_ENV = "OPENBOT_ACCESS_EXAMPLES"
# Room for every entry of a random pool in `context`, so that it stops at none.
CONTEXT_ROOM = 100_000
ACTIVE, INVALIDATED, RETRACTED = (
    Entry.Status.ACTIVE,
    Entry.Status.INVALIDATED,
    Entry.Status.RETRACTED,
)
FACT, OBSERVATION, PINNED = Entry.Layer.FACT, Entry.Layer.OBSERVATION, Entry.Layer.PINNED
CHATS = ["chat_1", "chat_2", "chat_3"]
ITEMS = [(chat, item) for chat in CHATS for item in (1, 2, 3)]
PURGE_KINDS = ("from:", "chat:", "org:", "channel:")


def example_count() -> int:
    raw = os.environ.get(EXAMPLES_ENV)
    if raw:
        return int(raw)
    return 1000 if connection.vendor == "postgresql" else 200


# --- The reference: [V4] read literally over the test's own model of the pool. ---------------


@dataclass
class RefEntry:
    layer: str
    status: str
    tags: set[str]
    source_items: list[tuple[str, int]] = field(default_factory=list)
    source_entries: list[str] = field(default_factory=list)
    # (chat, item, rule, organization) per source item [V3]; a pinned entry's author rule.
    evidence: list[tuple[str, int, str, str]] = field(default_factory=list)
    excluded: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class RefReader:
    organization: str
    person: str | None = None
    circle: str | None = None


@dataclass
class PoolModel:
    """What the test itself knows about the pool and the tenancy around it."""

    channel_org: dict[str, str]
    members: dict[str, set[str]]
    # [H6] The people with `read` on the bot they read through, per organization.
    bot_users: dict[str, set[str]]
    entries: dict[str, RefEntry] = field(default_factory=dict)

    def channels(self, reader: RefReader) -> set[str]:
        """[H5] The channels the reader counts as now.

        A channel is a group of people in one organization, so its membership counts only for
        work in that organization; a circle is its own channel.
        """
        if reader.circle is not None:
            return {reader.circle}
        return {
            channel
            for channel, people in self.members.items()
            if reader.person in people and self.channel_org[channel] == reader.organization
        }

    def admits(self, reader: RefReader, tag: str) -> bool:
        """[V4](c) Whether one `for:` tag admits the reader."""
        if tag == "for:bot":
            # [N2] A channel circle reads through its group chat: for:bot admits it.
            return reader.circle is not None or reader.person in self.bot_users.get(
                reader.organization, set()
            )
        if tag.startswith("for:person:"):
            return reader.person is not None and tag == f"for:person:{reader.person}"
        if tag.startswith("for:channel:"):
            return tag.removeprefix("for:channel:") in self.channels(reader)
        return False

    def satisfies(self, reader: RefReader, rule: str, organization: str) -> bool:
        """[V3, V4](d) Whether the reader satisfies one evidence rule now."""
        if organization != reader.organization:
            return False
        if rule.startswith("person:"):
            return reader.person is not None and rule == f"person:{reader.person}"
        if rule.startswith("channel:"):
            return rule.removeprefix("channel:") in self.channels(reader)
        return False

    def may_see(self, reader: RefReader, entry_id: str, path: frozenset[str] = frozenset()) -> bool:
        entry = self.entries.get(entry_id)
        if entry is None:
            return False
        # (a)
        if entry.status == RETRACTED:
            return False
        if reader.person is not None and reader.person in entry.excluded:
            return False
        # [V10] A circle: no current member of the channel may be excluded.
        if reader.circle is not None and self.members.get(reader.circle, set()) & entry.excluded:
            return False
        # (b)
        if any(tag != f"org:{reader.organization}" for tag in entry.tags if tag[:4] == "org:"):
            return False
        # (c) — and [V1]: no for: tag, nobody.
        if not any(self.admits(reader, tag) for tag in entry.tags if tag[:4] == "for:"):
            return False
        # (d)
        if entry.layer == PINNED and not entry.evidence:
            return False
        if entry.layer == FACT:
            proven = {(chat, item) for chat, item, _, _ in entry.evidence}
            if not entry.source_items or not set(entry.source_items) <= proven:
                return False
        if not all(self.satisfies(reader, rule, org) for _, _, rule, org in entry.evidence):
            return False
        # (e)
        if entry.layer == OBSERVATION:
            if not entry.source_entries:
                return False
            for source_id in entry.source_entries:
                if source_id == entry_id or source_id in path:
                    return False  # a cycle
                source = self.entries.get(source_id)
                if source is None or source.status != ACTIVE:
                    return False
                if not self.may_see(reader, source_id, path | {entry_id}):
                    return False
        return True

    def visible(self, reader: RefReader, *, active_only: bool) -> set[str]:
        return {
            entry_id
            for entry_id, entry in self.entries.items()
            if (not active_only or entry.status == ACTIVE) and self.may_see(reader, entry_id)
        }


# --- The world every example starts from (rolled back after each example). ------------------


@dataclass
class Tenancy:
    org_a: Organization
    org_b: Organization
    bot: Bot
    linked: Bot
    people: dict[str, Person]
    # organization id -> the people who work in it
    staff: dict[str, list[str]]
    channels: dict[str, Channel]

    def bot_of(self, organization_id: str) -> Bot:
        return self.bot if organization_id == self.org_a.id else self.linked

    def members(self) -> list[tuple[Organization, str, Bot]]:
        """Each person in each organization they work in, with the bot they read there."""
        organizations = {self.org_a.id: self.org_a, self.org_b.id: self.org_b}
        return [
            (organizations[organization_id], person_id, self.bot_of(organization_id))
            for organization_id, people in self.staff.items()
            for person_id in people
        ]

    def readers(self) -> list[tuple[RefReader, Reader]]:
        readers = []
        for organization_id, people in self.staff.items():
            for person_id in people:
                readers.append(
                    (
                        RefReader(organization=organization_id, person=person_id),
                        Reader.person(
                            bot=self.bot_of(organization_id),
                            person_id=person_id,
                            organization_id=organization_id,
                        ),
                    )
                )
        for channel_id, channel in self.channels.items():
            readers.append(
                (
                    RefReader(organization=channel.organization_id, circle=channel_id),
                    Reader.circle(channel_id=channel_id, organization_id=channel.organization_id),
                )
            )
        return readers


@pytest.fixture
def tenancy(db: Any) -> Tenancy:
    return make_tenancy()


def make_tenancy() -> Tenancy:
    """Two organizations, people in one or both, a bot and its link, channels in each."""
    org_a = services.organization_create(name="Org A")
    org_b = services.organization_create(name="Org B")
    people_a = [services.person_create(organization=org_a, name=f"a{n}") for n in range(2)]
    people_b = [services.person_create(organization=org_b, name="b0")]
    # Someone who works in both organizations.
    both = services.person_create(organization=org_a, name="x")
    services.membership_add(organization=org_b, person=both)
    bot = services.bot_create(organization=org_a, name="pool")
    linked = services.bot_link(bot=bot, organization=org_b)
    channels = [services.channel_create(organization=org_a, members=[]) for _ in range(2)]
    channels.append(services.channel_create(organization=org_b, members=[]))
    people = {person.id: person for person in [*people_a, *people_b, both]}
    return Tenancy(
        org_a=org_a,
        org_b=org_b,
        bot=bot,
        linked=linked,
        people=people,
        staff={
            org_a.id: [person.id for person in [*people_a, both]],
            org_b.id: [person.id for person in [*people_b, both]],
        },
        channels={channel.id: channel for channel in channels},
    )


# --- Operations: each runs the real service and updates the model the same way. -------------


class Pool:
    def __init__(self, data: st.DataObject, world: Tenancy, model: PoolModel) -> None:
        self.data = data
        self.world = world
        self.model = model
        self.pool_id = world.bot.id
        self.imported = 0
        self.seen_ids: list[str] = []

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def organization(self) -> str:
        return str(self.draw(st.sampled_from(list(self.world.staff))))

    def person_in(self, organization_id: str) -> str:
        return str(self.draw(st.sampled_from(self.world.staff[organization_id])))

    def channel_in(self, organization_id: str) -> str:
        return str(
            self.draw(
                st.sampled_from(
                    [
                        channel_id
                        for channel_id, org in self.model.channel_org.items()
                        if org == organization_id
                    ]
                )
            )
        )

    def items(self) -> list[tuple[str, int]]:
        items = self.draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=3, unique=True))
        return [(str(chat), int(item)) for chat, item in items]

    def audience(self) -> list[str]:
        everyone = [f"for:person:{person_id}" for person_id in self.world.people]
        everyone += [f"for:channel:{channel_id}" for channel_id in self.world.channels]
        everyone.append("for:bot")
        return list(self.draw(st.lists(st.sampled_from(everyone), min_size=1, max_size=2)))

    def some_id(self) -> str | None:
        known = list(self.model.entries)
        return str(self.draw(st.sampled_from(known))) if known else None

    def source_pool(self, extra: list[str]) -> list[str]:
        # Ids that exist, ids that were purged, ids an import may create later, and never.
        future = [f"mem_imp{n}" for n in range(self.imported + 3)]
        return list(dict.fromkeys([*self.seen_ids, *future, *extra, "mem_never"]))

    def carried_tags(self, sources: list[str]) -> set[str]:
        """[W7] An observation carries the from/org/chat/channel/app tags of its sources."""
        return {
            tag
            for source in sources
            if source in self.model.entries
            for tag in self.model.entries[source].tags
            if tag.split(":", 1)[0] in ("from", "org", "chat", "channel", "app")
        }

    def create(self, ref: RefEntry, **kwargs: Any) -> None:
        with pool_change(pool_id=self.pool_id, by=Change.By.MEMORY_BOT) as change:
            entry = entry_create_in(
                change,
                layer=ref.layer,
                content=f"content {len(self.seen_ids)}",
                tags=sorted(ref.tags),
                source_items=ref.source_items,
                source_entries=ref.source_entries,
                evidence=[
                    ItemEvidence(chat_id=chat, item_seq=item, rule=rule, organization_id=org)
                    for chat, item, rule, org in ref.evidence
                ],
                **kwargs,
            )
        self.model.entries[entry.id] = ref
        self.seen_ids.append(entry.id)

    # [V2, V3] A fact from a private chat, a group chat, or items of both kinds.
    def fact(self) -> None:
        org = self.organization()
        person = self.person_in(org)
        channel = self.channel_in(org)
        kind = self.draw(st.sampled_from(["private", "group", "mixed"]))
        items = self.items()
        tags = {f"from:{person}", f"org:{org}"} | {f"chat:{chat}" for chat, _ in items}
        if kind == "private":
            rules = [f"person:{person}"] * len(items)
            tags.add(f"for:person:{person}")
        elif kind == "group":
            rules = [f"channel:{channel}"] * len(items)
            tags |= {f"for:channel:{channel}", f"channel:{channel}"}
        else:
            rules = [
                str(self.draw(st.sampled_from([f"person:{person}", f"channel:{channel}"])))
                for _ in items
            ]
            tags |= {
                str(self.draw(st.sampled_from([f"for:person:{person}", f"for:channel:{channel}"]))),
                f"channel:{channel}",
            }
        if self.draw(st.booleans()):
            tags.add("app:calendar")
        evidence = [
            (chat, item, rule, org) for (chat, item), rule in zip(items, rules, strict=True)
        ]
        self.create(RefEntry(FACT, ACTIVE, tags, source_items=items, evidence=evidence))

    # [A2, V2] Remember.
    def pin(self) -> None:
        org = self.organization()
        person = self.person_in(org)
        entry = entry_remember(
            pool_id=self.pool_id,
            person_id=person,
            organization_id=org,
            content="pinned",
            topics=["kept"],
        )
        self.model.entries[entry.id] = RefEntry(
            PINNED,
            ACTIVE,
            {f"from:{person}", f"for:person:{person}", f"org:{org}", "kept"},
            evidence=[("", 0, f"person:{person}", org)],
        )
        self.seen_ids.append(entry.id)

    # [E2, W7] An observation over entries. Its audience is mostly one its sources suggest,
    # sometimes any at all: the rule must hold whatever audience a caller stored.
    def observation(self) -> None:
        if not self.seen_ids:
            return
        # Mostly over entries that exist; sometimes over purged, future or unknown ids.
        existing = list(self.model.entries)
        choices = existing if existing and self.draw(st.integers(0, 4)) > 0 else None
        sources = list(
            self.draw(
                st.lists(
                    st.sampled_from(choices or self.source_pool([])),
                    min_size=1,
                    max_size=3,
                    unique=True,
                )
            )
        )
        # Often a conclusion over another conclusion (depth, and chains of rules).
        conclusions = [key for key in existing if self.model.entries[key].layer == OBSERVATION]
        if conclusions and self.draw(st.booleans()):
            deeper = str(self.draw(st.sampled_from(conclusions)))
            sources = [deeper, *(source for source in sources if source != deeper)]
        tags = self.carried_tags(sources) | set(self.audience_over(sources))
        self.create(RefEntry(OBSERVATION, ACTIVE, tags, source_entries=sources), confidence=0.5)

    def audience_over(
        self,
        sources: list[str],
        evidence: list[tuple[str, int, str, str]] | None = None,
    ) -> list[str]:
        """Mostly an audience the sources or the evidence suggest (a `for:` tag of a source, or
        the person or channel of a rule), so that many entries are visible; else any."""
        suggested = {f"for:{rule}" for _, _, rule, _ in evidence or []}
        for source in sources:
            entry = self.model.entries.get(source)
            if entry is None:
                continue
            suggested |= {tag for tag in entry.tags if tag.startswith("for:")}
            suggested |= {f"for:{rule}" for _, _, rule, _ in entry.evidence}
        if suggested and self.draw(st.integers(0, 3)) > 0:
            return [str(self.draw(st.sampled_from(sorted(suggested))))]
        return self.audience()

    # [V7] Entries from an older version: cycles, missing sources, missing evidence.
    def import_batch(self) -> None:
        size = int(self.draw(st.integers(1, 4)))
        ids = [f"mem_imp{self.imported + n}" for n in range(size)]
        self.imported += size
        batch: list[ImportedEntry] = []
        for entry_id in ids:
            layer = self.draw(st.sampled_from([FACT, OBSERVATION, PINNED]))
            status = self.draw(st.sampled_from([ACTIVE, ACTIVE, ACTIVE, INVALIDATED, RETRACTED]))
            org = self.organization()
            person = self.person_in(org)
            ref = RefEntry(layer, status, set())
            if layer == OBSERVATION:
                # Existing entries and this batch (cycles), or anything (missing, future).
                near = [*self.model.entries, *ids]
                choices = near if self.draw(st.booleans()) else self.source_pool(ids)
                ref.source_entries = list(
                    self.draw(st.lists(st.sampled_from(choices), max_size=3, unique=True))
                )
                ref.tags = self.carried_tags(ref.source_entries)
                # Imported entries may carry any or no org: tag of their own.
                if self.draw(st.booleans()):
                    ref.tags.add(f"org:{org}")
            elif layer == FACT:
                ref.source_items = self.items()
                channel = self.channel_in(org)
                rules = self.draw(
                    st.sampled_from(
                        [
                            [f"person:{person}"],
                            [f"channel:{channel}"],
                            [f"person:{person}", f"channel:{channel}"],
                        ]
                    )
                )
                for chat, item in ref.source_items:
                    if self.draw(st.integers(0, 4)) == 0:
                        continue  # no evidence for this item
                    rule = self.draw(st.sampled_from(rules))
                    proof_org = self.draw(st.sampled_from([org, org, self.organization()]))
                    ref.evidence.append((chat, item, str(rule), str(proof_org)))
                ref.tags = {f"from:{person}", f"org:{org}", f"chat:{ref.source_items[0][0]}"}
            else:
                if self.draw(st.integers(0, 4)) > 0:
                    ref.evidence = [("", 0, f"person:{person}", org)]
                ref.tags = {f"from:{person}", f"org:{org}"}
            # [V1] Sometimes no for: tag at all.
            if self.draw(st.integers(0, 5)) > 0:
                ref.tags |= set(self.audience_over(ref.source_entries, ref.evidence))
            if self.draw(st.booleans()):
                ref.tags.discard(f"from:{person}")
            self.model.entries[entry_id] = ref
            batch.append(
                ImportedEntry(
                    id=entry_id,
                    layer=layer,
                    content=f"imported {entry_id}",
                    tags=sorted(ref.tags),
                    status=status,
                    source_items=ref.source_items,
                    source_entries=ref.source_entries,
                    evidence=[
                        ItemEvidence(chat_id=chat, item_seq=item, rule=rule, organization_id=org)
                        for chat, item, rule, org in ref.evidence
                    ],
                    confidence=0.5 if layer == OBSERVATION else None,
                )
            )
        entries_import(pool_id=self.pool_id, entries=batch)
        self.seen_ids += ids

    # [E5, V6] Invalidate, retract (or, as a stress of the derived data, reactivate).
    def set_status(self) -> None:
        entry_id = self.some_id()
        if entry_id is None:
            return
        status = self.draw(st.sampled_from([INVALIDATED, INVALIDATED, RETRACTED, ACTIVE]))
        with pool_change(pool_id=self.pool_id, by=Change.By.MEMORY_BOT) as change:
            entry_set_status_in(change, entry_id=entry_id, status=status)
        self.model.entries[entry_id].status = status

    # [P1] Forget, by a person reading in one of their organizations.
    def people_behind(self, entry_id: str) -> set[str]:
        """[P1] The entry's `from:` people, and the author of a pinned entry."""
        entry = self.model.entries[entry_id]
        people = {tag.removeprefix("from:") for tag in entry.tags if tag.startswith("from:")}
        if entry.layer == PINNED:
            people |= {
                rule.removeprefix("person:")
                for _, _, rule, _ in entry.evidence
                if rule.startswith("person:")
            }
        return people

    def forget(self) -> None:
        # Mostly an entry the person may see (often one that others are behind too, so
        # Forget excludes rather than retracts), sometimes any entry (refused).
        allowed = [
            (org, person, entry_id)
            for org, people in self.world.staff.items()
            for person in people
            for entry_id in self.model.entries
            if self.model.may_see(RefReader(organization=org, person=person), entry_id)
        ]
        shared = [row for row in allowed if self.people_behind(row[2]) != {row[1]}]
        how = self.draw(st.integers(0, 3))
        if how >= 2 and shared:
            org, person, entry_id = self.draw(st.sampled_from(shared))
        elif how >= 1 and allowed:
            org, person, entry_id = self.draw(st.sampled_from(allowed))
        else:
            org = self.organization()
            person = self.person_in(org)
            some = self.some_id()
            if some is None:
                return
            entry_id = some
        visible = self.model.visible(RefReader(organization=org, person=person), active_only=False)
        reader = Reader.person(bot=self.world.bot_of(org), person_id=person, organization_id=org)
        if entry_id not in visible:
            event("forget refused (not for the reader)")
            with pytest.raises(Conflict):
                entry_forget(pool_id=self.pool_id, reader=reader, entry_id=entry_id)
            return
        entry_forget(pool_id=self.pool_id, reader=reader, entry_id=entry_id)
        ref = self.model.entries[entry_id]
        # [P1] "the only person behind the entry": nobody behind it is not P alone.
        if self.people_behind(entry_id) == {person}:
            event("forget retracts")
            ref.status = RETRACTED
        else:
            event("forget excludes")
            ref.tags -= {f"from:{person}", f"for:person:{person}"}
            ref.excluded.add(person)

    # [H5] Membership changes at any time.
    def membership(self) -> None:
        channel_id = str(self.draw(st.sampled_from(list(self.world.channels))))
        organization_id = self.model.channel_org[channel_id]
        person_id = self.person_in(organization_id)
        channel, person = self.world.channels[channel_id], self.world.people[person_id]
        if self.draw(st.booleans()):
            services.channel_member_add(channel=channel, person=person)
            self.model.members[channel_id].add(person_id)
        else:
            services.channel_member_remove(channel=channel, person=person)
            self.model.members[channel_id].discard(person_id)

    # [P2] Purge by tag.
    def purge(self) -> None:
        tags = sorted(
            {
                tag
                for entry in self.model.entries.values()
                for tag in entry.tags
                if tag.startswith(PURGE_KINDS)
            }
        )
        if not tags:
            return
        tag = str(self.draw(st.sampled_from(tags)))
        doomed = [entry_id for entry_id, entry in self.model.entries.items() if tag in entry.tags]
        assert pool_purge(pool_id=self.pool_id, tag=tag) == len(doomed)
        for entry_id in doomed:
            del self.model.entries[entry_id]


OPERATIONS = [
    *["fact"] * 4,
    *["pin"] * 2,
    *["observation"] * 5,
    *["import_batch"] * 2,
    *["set_status"] * 2,
    *["forget"] * 2,
    *["membership"] * 3,
    "purge",
]


def shaped_rows(
    way: Callable[..., QuerySet[Entry]],
    pool_id: str,
    reader: Reader,
    active_only: bool,
    columns: tuple[str, ...],
) -> list[dict[str, Any]]:
    """`way(...).values(*columns)` as the hot reads run it [Q4]: the same queryset, built and
    compiled once per reader shape (`memory.shapes`), run with this reader's values. Building
    it again for every reader of every example was most of the test's time."""
    shape = shape_of(pool_id=pool_id, reader=reader)

    def build() -> QuerySet[Any, Any]:
        return way(pool_id=shape.pool_id, reader=shape.reader, active_only=active_only).values(
            *columns
        )

    return compiled((way.__name__, active_only, columns, shape.key), build).rows(shape.values)


def check_every_reader(world: Tenancy, model: PoolModel) -> None:
    check_every_listing(world, model)
    shown: set[str] = set()
    # [Q4] Both ways of checking: each closure row, and the set of entries that pass.
    ways = (visible_entries, every_visible_entry)
    for ref_reader, reader in world.readers():
        for active_only, way in itertools.product((False, True), ways):
            rows = [
                (row["rank"], row["updated_at"], row["id"])
                for row in shaped_rows(
                    way, world.bot.id, reader, active_only, ("rank", "updated_at", "id")
                )
            ]
            expected = model.visible(ref_reader, active_only=active_only)
            actual = {entry_id for _, _, entry_id in rows}
            assert actual == expected, (
                f"{ref_reader} active_only={active_only} {way.__name__}: "
                f"shown but hidden by [V4]: {sorted(actual - expected)}; "
                f"hidden but allowed by [V4]: {sorted(expected - actual)}"
            )
            # [E6] Memory order: pinned first, then updatedAt descending, then id.
            assert rows == sorted(rows, key=lambda row: (row[0], -row[1], row[2]))
            shown |= actual
        # [S1] Their context without a query: every active entry they see, in memory order,
        # and with half the room those take, the ones before the first that does not fit.
        in_order = [
            (row["id"], row["content_length"])
            for row in shaped_rows(
                every_visible_entry, world.bot.id, reader, True, ("id", "content_length")
            )
        ]
        bot = world.bot_of(reader.organization_id)
        used = context(bot, reader, CONTEXT_ROOM).entry_ids
        assert used == [entry_id for entry_id, _ in in_order], f"{ref_reader} context"
        lines = [length + CONTEXT_LINE_OVERHEAD for _, length in in_order]
        room = sum(lines) // 2
        fitting = next((end for end in range(len(lines)) if sum(lines[: end + 1]) > room), 0)
        used = context(bot, reader, room).entry_ids
        assert used == [entry_id for entry_id, _ in in_order[:fitting]], f"{ref_reader} {room}"
    # What the examples exercised (`--hypothesis-show-statistics`).
    hidden = set(model.entries) - shown
    event(f"entries visible to someone: {min(len(shown), 6)}{'+' if len(shown) >= 6 else ''}")
    event(f"entries hidden from everyone: {min(len(hidden), 6)}{'+' if len(hidden) >= 6 else ''}")
    for layer in (FACT, OBSERVATION, PINNED):
        if any(model.entries[entry_id].layer == layer for entry_id in shown):
            event(f"a visible {layer}")
    if any(entry_id.startswith("mem_imp") for entry_id in shown):
        event("a visible imported entry")
    if any(
        source in model.entries and model.entries[source].layer == OBSERVATION
        for entry_id in shown
        for source in model.entries[entry_id].source_entries
    ):
        event("a visible observation over an observation")


def random_pools(max_examples: int) -> settings:
    """Hypothesis settings for tests over `random_pool` (slow examples, function fixtures)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


def check_every_listing(world: Tenancy, model: PoolModel) -> None:
    """[L1, Q4] Each person's listing as the memory route reads it: one statement built on the
    rights last read for them in this process, checked in its own snapshot. Run before
    `world.readers()` reads the rights again, the rights are often the previous example's."""
    for organization_id, people in world.staff.items():
        for person_id in people:
            reader = Reader(
                organization_id=organization_id,
                person_id=person_id,
                bot=world.bot_of(organization_id),
            )
            listed, _ = entries_for_reader(pool_id=world.bot.id, reader=reader, tags=[])
            expected = model.visible(
                RefReader(organization=organization_id, person=person_id), active_only=False
            )
            assert {entry["id"] for entry in listed} == expected, f"{person_id} listing"
            # The same listing by pages of two, under the pool's lock.
            paged, after = [], None
            while True:
                page, _, after = entry_page_for_reader(
                    pool_id=world.bot.id, reader=reader, tags=[], after=after, limit=2
                )
                paged += [entry["id"] for entry in page]
                if after is None:
                    break
            assert paged == [entry["id"] for entry in listed], f"{person_id} pages"
            # [S1] Their context without a query, one statement on the same guessed rights:
            # the active entries of the listing, in its order.
            active = model.visible(
                RefReader(organization=organization_id, person=person_id), active_only=True
            )
            used = context(world.bot_of(organization_id), reader, CONTEXT_ROOM).entry_ids
            assert used == [entry["id"] for entry in listed if entry["id"] in active], (
                f"{person_id} context"
            )


def reference_check(shard: int) -> Callable[..., None]:
    """One of SHARDS tests that each check an equal share of the examples against the
    reference, so that `make test`'s workers share the work. Each has its own name, and so its
    own examples (a derandomized run, as on CI, seeds Hypothesis from the test's name)."""

    def check(tenancy: Tenancy, data: st.DataObject) -> None:
        with transaction.atomic():
            model = random_pool(tenancy, data)
            check_every_reader(tenancy, model)
            transaction.set_rollback(True)

    check.__name__ = check.__qualname__ = f"test_visible_entries_match_the_reference_{shard}"
    return random_pools(max(example_count() // SHARDS, 1))(given(data=st.data())(check))


SHARDS = 4
test_visible_entries_match_the_reference_0 = reference_check(0)
test_visible_entries_match_the_reference_1 = reference_check(1)
test_visible_entries_match_the_reference_2 = reference_check(2)
test_visible_entries_match_the_reference_3 = reference_check(3)


def random_pool(world: Tenancy, data: st.DataObject) -> PoolModel:
    """Random memberships and grants, then a random pool built through the real services;
    returns the test's own model of it. Call it inside a transaction that is rolled back."""
    organization_of = {
        channel_id: channel.organization_id for channel_id, channel in world.channels.items()
    }
    model = PoolModel(
        channel_org=organization_of,
        members={channel_id: set() for channel_id in world.channels},
        bot_users={organization_id: set() for organization_id in world.staff},
    )
    # The starting memberships and grants are stored in bulk (one query each, to keep
    # a thousand examples fast); later membership changes go through the services.
    members, grants = [], []
    for channel_id, organization_id in organization_of.items():
        for person_id in world.staff[organization_id]:
            if data.draw(st.booleans()):
                members.append(ChannelMember(channel_id=channel_id, person_id=person_id))
                model.members[channel_id].add(person_id)
    for organization_id, people in world.staff.items():
        for person_id in people:
            if data.draw(st.integers(0, 3)) > 0:
                level = str(data.draw(st.sampled_from(["read", "write"])))
                grants.append(
                    Grant(bot=world.bot_of(organization_id), person_id=person_id, level=level)
                )
                model.bot_users[organization_id].add(person_id)
    ChannelMember.objects.bulk_create(members)
    Grant.objects.bulk_create(grants)
    pool = Pool(data, world, model)
    # Some entries to start from, then anything.
    base = data.draw(st.lists(st.sampled_from(["fact", "pin"]), min_size=2, max_size=4))
    operations = data.draw(st.lists(st.sampled_from(OPERATIONS), min_size=2, max_size=10))
    for operation in [*base, *operations]:
        getattr(pool, operation)()
    return model


# --- [V5] audience_allowed ---------------------------------------------------------------


@dataclass
class Small:
    world: Tenancy
    alice: str
    bob: str
    carol: str
    channel: str
    other_channel: str

    @property
    def pool_id(self) -> str:
        return self.world.bot.id

    @property
    def org(self) -> str:
        return self.world.org_a.id

    def fact(self, *, rule: str, audience: str, said_by: str | None = None) -> str:
        with pool_change(pool_id=self.pool_id, by=Change.By.MEMORY_BOT) as change:
            entry = entry_create_in(
                change,
                layer=FACT,
                content="a fact",
                tags=[f"from:{said_by or self.bob}", f"org:{self.org}", audience, "chat:chat_1"],
                source_items=[("chat_1", 1)],
                evidence=[ItemEvidence("chat_1", 1, rule, self.org)],
            )
        return entry.id

    def observation(self, *, sources: list[str], audience: str) -> str:
        with pool_change(pool_id=self.pool_id, by=Change.By.MEMORY_BOT) as change:
            entry = entry_create_in(
                change,
                layer=OBSERVATION,
                content="a conclusion",
                tags=[f"org:{self.org}", audience],
                source_entries=sources,
                confidence=0.7,
            )
        return entry.id

    def reader(self, person_id: str) -> Reader:
        return Reader.person(bot=self.world.bot, person_id=person_id, organization_id=self.org)


@pytest.fixture
def small(tenancy: Tenancy) -> Small:
    alice, bob, carol = tenancy.staff[tenancy.org_a.id][:3]
    channel, other_channel = [
        channel_id
        for channel_id, channel in tenancy.channels.items()
        if channel.organization_id == tenancy.org_a.id
    ][:2]
    for person_id in (alice, bob):
        services.channel_member_add(
            channel=tenancy.channels[channel], person=tenancy.people[person_id]
        )
    services.grant_set(bot=tenancy.bot, level="read", organization=tenancy.org_a)
    return Small(tenancy, alice, bob, carol, channel, other_channel)


def test_audience_of_a_group_fact(small: Small) -> None:
    fact = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    assert audience_allowed(source_ids=[fact], audience=f"for:channel:{small.channel}")
    assert not audience_allowed(source_ids=[fact], audience=f"for:channel:{small.other_channel}")
    # A current member of the channel may receive it; someone outside may not.
    assert audience_allowed(source_ids=[fact], audience=f"for:person:{small.alice}")
    assert not audience_allowed(source_ids=[fact], audience=f"for:person:{small.carol}")
    # [V5] Widening to everyone who uses the bot cannot satisfy a channel's rule.
    assert not audience_allowed(source_ids=[fact], audience="for:bot")


def test_audience_of_a_private_fact(small: Small) -> None:
    fact = small.fact(rule=f"person:{small.alice}", audience=f"for:person:{small.alice}")
    assert audience_allowed(source_ids=[fact], audience=f"for:person:{small.alice}")
    assert not audience_allowed(source_ids=[fact], audience=f"for:person:{small.bob}")
    assert not audience_allowed(source_ids=[fact], audience=f"for:channel:{small.channel}")
    assert not audience_allowed(source_ids=[fact], audience="for:bot")


def test_audience_must_satisfy_every_source(small: Small) -> None:
    private = small.fact(rule=f"person:{small.alice}", audience=f"for:person:{small.alice}")
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    both = [private, group]
    assert audience_allowed(source_ids=both, audience=f"for:person:{small.alice}")
    # Taking part in one source gives no access to the other.
    assert not audience_allowed(source_ids=both, audience=f"for:person:{small.bob}")
    assert not audience_allowed(source_ids=both, audience=f"for:channel:{small.channel}")
    # Membership is read now [H5]: once alice leaves, she no longer satisfies the group rule.
    services.channel_member_remove(
        channel=small.world.channels[small.channel], person=small.world.people[small.alice]
    )
    assert not audience_allowed(source_ids=both, audience=f"for:person:{small.alice}")


def test_audience_is_checked_through_observations(small: Small) -> None:
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    conclusion = small.observation(sources=[group], audience=f"for:channel:{small.channel}")
    # The observation has no evidence of its own: the rule of its source still binds.
    assert not audience_allowed(source_ids=[conclusion], audience="for:bot")
    assert not audience_allowed(source_ids=[conclusion], audience=f"for:person:{small.carol}")
    assert audience_allowed(source_ids=[conclusion], audience=f"for:channel:{small.channel}")


def test_audience_of_a_pinned_entry_is_its_author(small: Small) -> None:
    pinned = entry_remember(
        pool_id=small.pool_id,
        person_id=small.alice,
        organization_id=small.org,
        content="my note",
        topics=[],
    ).id
    assert audience_allowed(source_ids=[pinned], audience=f"for:person:{small.alice}")
    assert not audience_allowed(source_ids=[pinned], audience=f"for:person:{small.bob}")
    assert not audience_allowed(source_ids=[pinned], audience=f"for:channel:{small.channel}")
    assert not audience_allowed(source_ids=[pinned], audience="for:bot")


def test_audience_refuses_unknown_sources_and_tags(small: Small) -> None:
    fact = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    assert not audience_allowed(source_ids=[fact], audience="for:everyone")
    assert not audience_allowed(source_ids=[fact], audience=f"from:{small.alice}")
    # A source that does not exist proves nothing, so it allows no audience.
    assert not audience_allowed(source_ids=["mem_missing"], audience="for:bot")
    assert not audience_allowed(
        source_ids=[fact, "mem_missing"], audience=f"for:person:{small.alice}"
    )


# --- [S3] validate_references -------------------------------------------------------------


def test_validate_references_follows_current_access(small: Small) -> None:
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    conclusion = small.observation(sources=[group], audience=f"for:channel:{small.channel}")
    bot = small.world.bot
    alice = small.reader(small.alice)
    assert validate_references(bot, alice, [conclusion])
    assert validate_references(bot, alice, [group, conclusion])
    assert validate_references(bot, alice, [])
    assert not validate_references(bot, small.reader(small.carol), [conclusion])
    assert not validate_references(bot, alice, [conclusion, "mem_unknown"])
    # A source no longer allowed invalidates the stored answer [S3]: here alice leaves.
    services.channel_member_remove(
        channel=small.world.channels[small.channel], person=small.world.people[small.alice]
    )
    assert not validate_references(bot, small.reader(small.alice), [conclusion])
    assert validate_references(bot, small.reader(small.bob), [conclusion])


def test_validate_references_refuses_an_invalidated_source(small: Small) -> None:
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    conclusion = small.observation(sources=[group], audience=f"for:channel:{small.channel}")
    circle = Reader.circle(channel_id=small.channel, organization_id=small.org)
    assert validate_references(small.world.bot, circle, [conclusion])
    with pool_change(pool_id=small.pool_id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=group, status=INVALIDATED)
    assert not validate_references(small.world.bot, circle, [conclusion])
    assert not validate_references(small.world.bot, circle, [group])


def test_validate_references_refuses_a_forgotten_source(small: Small) -> None:
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    conclusion = small.observation(sources=[group], audience=f"for:channel:{small.channel}")
    alice = small.reader(small.alice)
    assert validate_references(small.world.bot, alice, [conclusion])
    entry_forget(pool_id=small.pool_id, reader=alice, entry_id=group)
    assert not validate_references(small.world.bot, alice, [conclusion])
    assert validate_references(small.world.bot, small.reader(small.bob), [conclusion])


def test_validate_references_ignores_new_entries_past_the_limit(small: Small) -> None:
    """[S3] New entries that push old text past the context limit do not invalidate it."""
    fact = small.fact(rule=f"person:{small.alice}", audience=f"for:person:{small.alice}")
    alice = small.reader(small.alice)
    used = context(small.world.bot, alice, limit=100)
    assert used.entry_ids == [fact]
    for _ in range(5):
        entry_remember(
            pool_id=small.pool_id,
            person_id=small.alice,
            organization_id=small.org,
            content="x" * 90,
            topics=[],
        )
    # Pinned entries come first in memory order, so the fact no longer fits in the limit …
    assert fact not in context(small.world.bot, alice, limit=100).entry_ids
    # … but the answer that used it may still be used.
    assert validate_references(small.world.bot, alice, used.entry_ids)


# --- [P1] Forget on entries with several or no people behind them -------------------------


def test_forget_by_one_of_several_people_keeps_the_entry_for_the_others(small: Small) -> None:
    group = small.fact(rule=f"channel:{small.channel}", audience=f"for:channel:{small.channel}")
    entry_forget(pool_id=small.pool_id, reader=small.reader(small.alice), entry_id=group)
    alice, bob = small.reader(small.alice), small.reader(small.bob)
    assert not visible_entries(pool_id=small.pool_id, reader=alice, active_only=False).exists()
    assert [
        entry.id for entry in visible_entries(pool_id=small.pool_id, reader=bob, active_only=True)
    ] == [group]
    # bob said it: he is the only person behind it, so his Forget retracts it for everyone.
    entry_forget(pool_id=small.pool_id, reader=bob, entry_id=group)
    assert Entry.objects.get(id=group).status == RETRACTED


def test_forget_of_an_entry_nobody_is_behind_excludes_only_the_reader(small: Small) -> None:
    entries_import(
        pool_id=small.pool_id,
        entries=[
            ImportedEntry(
                id="mem_old",
                layer=FACT,
                content="from an older version",
                tags=[f"org:{small.org}", f"for:channel:{small.channel}"],
                source_items=[("chat_1", 1)],
                evidence=[ItemEvidence("chat_1", 1, f"channel:{small.channel}", small.org)],
            )
        ],
    )
    entry_forget(pool_id=small.pool_id, reader=small.reader(small.alice), entry_id="mem_old")
    assert Entry.objects.get(id="mem_old").status == ACTIVE
    bob = small.reader(small.bob)
    assert validate_references(small.world.bot, bob, ["mem_old"])
    assert not validate_references(small.world.bot, small.reader(small.alice), ["mem_old"])
