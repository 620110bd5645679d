"""Build the [Q1] world and memory pools through the real services.

The world: one organization with 1,000 people and 50 channels, and every member a user of the
bot (an organization `read` grant). A pool of `size` entries holds a fixed share that the
chosen reader may see (about 1,000 entries: their pinned entries and private facts, the group
facts of their two channels, observations over those) and a background of other people's and
channels' entries that fills the pool up to `size`. Pools of different sizes therefore differ
only in what the chosen reader may *not* see, which is what [Q1] asks to be free: "cost grows
with what the reader sees, not with the pool".

Entries are written with `memory.services.entries_import` (the bulk path), which commits in
batches [L2] and derives closure and soundness through `memory.graph.refresh` like every other
structural change.
"""

import random
import time
from collections import defaultdict
from dataclasses import dataclass

from django.db import connection, transaction

from memory.models import Entry
from memory.services import ImportedEntry, ItemEvidence, entries_import
from openbot import ids, services
from openbot.models import Bot, Channel, ChannelMember, Organization, Person

ORGANIZATION_NAME = "bench"
PEOPLE = 1_000
CHANNELS = 50
# Entries per `entries_import` call (which commits them in batches of its own).
IMPORT_BATCH = 2_000
YEAR_MS = 365 * 24 * 3600 * 1000

TOPICS = ["travel", "billing", "deploys", "hiring", "lunch", "roadmap", "oncall", "design"]
# fmt: off
WORDS = [
    "the", "team", "agreed", "to", "move", "weekly", "sync", "because", "release", "slipped",
    "customers", "asked", "about", "invoices", "while", "new", "office", "opens", "next", "spring",
]
# fmt: on


@dataclass(frozen=True)
class ReaderShare:
    """What the chosen reader may see in every pool, whatever its size."""

    pinned: int = 10
    private_facts: int = 300
    group_facts_per_channel: int = 250
    person_observations: int = 120
    channel_observations_per_channel: int = 50

    def total(self, channels: int) -> int:
        per_channel = self.group_facts_per_channel + self.channel_observations_per_channel
        return self.pinned + self.private_facts + self.person_observations + channels * per_channel


@dataclass
class World:
    """The organization, its people and channels; `chosen` and `typical` are the readers."""

    organization: Organization
    people: list[Person]
    channels: list[Channel]
    channels_of: dict[str, list[str]]
    members_of: dict[str, list[str]]

    @property
    def chosen(self) -> Person:
        """Member of the first two channels, with a large private share."""
        return self.people[0]

    @property
    def typical(self) -> Person:
        """A background person in one background channel."""
        return next(
            person
            for person in self.people[1:]
            if len(self.channels_of[person.id]) == 1
            and self.channels_of[person.id][0] not in self.chosen_channel_ids
        )

    @property
    def chosen_channel_ids(self) -> list[str]:
        return [channel.id for channel in self.channels[:2]]


@dataclass
class BuiltPool:
    bot: Bot
    size: int
    build_seconds: float


def world_build(*, seed: int = 1) -> World:
    """One organization, `PEOPLE` people, `CHANNELS` channels (each person in one or two)."""
    rng = random.Random(seed)
    with transaction.atomic():
        organization = services.organization_create(name=ORGANIZATION_NAME)
        people = [
            services.person_create(organization=organization, name=f"p{index:04d}")
            for index in range(PEOPLE)
        ]
        members: dict[int, list[Person]] = defaultdict(list)
        members[0].append(people[0])
        members[1].append(people[0])
        for index, person in enumerate(people[1:], start=1):
            primary = index % CHANNELS
            members[primary].append(person)
            if rng.random() < 0.3:
                second = rng.randrange(CHANNELS)
                if second != primary:
                    members[second].append(person)
        for index in range(CHANNELS):
            services.channel_create(
                organization=organization, members=members[index], name=f"c{index:02d}"
            )
    return world_load(organization)


def world_load(organization: Organization) -> World:
    """The world of an organization built by `world_build`."""
    people = list(Person.objects.filter(memberships__organization=organization).order_by("name"))
    channels = list(Channel.objects.filter(organization=organization).order_by("name"))
    channels_of: dict[str, list[str]] = {person.id: [] for person in people}
    members_of: dict[str, list[str]] = {channel.id: [] for channel in channels}
    for channel_id, person_id in (
        ChannelMember.objects.filter(channel__organization=organization)
        .order_by("channel__name", "person__name")
        .values_list("channel_id", "person_id")
    ):
        channels_of[person_id].append(channel_id)
        members_of[channel_id].append(person_id)
    return World(
        organization=organization,
        people=people,
        channels=channels,
        channels_of=channels_of,
        members_of=members_of,
    )


def world_find() -> World | None:
    """The world of an earlier run, if any."""
    organization = Organization.objects.filter(name=ORGANIZATION_NAME).first()
    return world_load(organization) if organization is not None else None


def world_remove() -> None:
    """Delete every earlier bench organization with its bots, pools and people."""
    organizations = Organization.objects.filter(name=ORGANIZATION_NAME)
    Person.objects.filter(memberships__organization__in=organizations).delete()
    organizations.delete()


def pool_find(world: World, size: int) -> BuiltPool | None:
    """A pool of `size` entries built by an earlier run, if complete."""
    bot = Bot.objects.filter(organization=world.organization, name=f"bench-{size}").first()
    if bot is None or Entry.objects.filter(bot=bot).count() != size:
        return None
    return BuiltPool(bot=bot, size=size, build_seconds=0.0)


def pool_build(
    world: World,
    *,
    size: int,
    share: ReaderShare | None = None,
    seed: int = 2,
    name: str | None = None,
) -> BuiltPool:
    """A new bot (`bench-<size>` unless named) whose pool holds `size` entries: the reader
    share and a background. Prints progress every 10,000 entries."""
    started = time.perf_counter()
    bot = services.bot_create(organization=world.organization, name=name or f"bench-{size}")
    services.grant_set(bot=bot, level="read", organization=world.organization)
    plan = _PoolPlan(world, random.Random(seed))
    plan.add_reader_share(share or ReaderShare())
    plan.add_background(size - len(plan.entries))
    for start in range(0, len(plan.entries), IMPORT_BATCH):
        entries_import(pool_id=bot.id, entries=plan.entries[start : start + IMPORT_BATCH])
        done = min(start + IMPORT_BATCH, len(plan.entries))
        if done % 10_000 == 0 or done == len(plan.entries):
            print(
                f"  {done:,} of {len(plan.entries):,} entries imported "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    settle()
    return BuiltPool(bot=bot, size=size, build_seconds=time.perf_counter() - started)


def settle() -> None:
    """After a bulk load, what autovacuum does in production: planner statistics, and the
    visibility map that lets the read indexes answer without visiting the table. The checkpoint
    writes the load out now rather than while the reads are timed."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
            cursor.execute("CHECKPOINT")


class _PoolPlan:
    """The entries of one pool, sources before the observations that name them."""

    def __init__(self, world: World, rng: random.Random) -> None:
        self.world = world
        self.rng = rng
        self.now = int(time.time() * 1000)
        self.organization_id = world.organization.id
        self.entries: list[ImportedEntry] = []
        self.depth: dict[str, int] = {}
        # The from:/org:/chat:/channel: tags an observation inherits from a source [W7].
        self.inherited: dict[str, list[str]] = {}
        # Entry ids by audience (`person:<u>`, `channel:<c>`) and depth (facts are 0).
        self.scopes: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.chat_of: dict[str, str] = {}
        self.last_seq: dict[str, int] = defaultdict(int)

    # -- the two shares ---------------------------------------------------------------------

    def add_reader_share(self, share: ReaderShare) -> None:
        reader = self.world.chosen.id
        for _ in range(share.pinned):
            self.pinned(reader)
        for _ in range(share.private_facts):
            self.private_fact(reader)
        for channel_id in self.world.chosen_channel_ids:
            for _ in range(share.group_facts_per_channel):
                self.group_fact(channel_id)
        audiences = [f"person:{reader}"] * share.person_observations + [
            f"channel:{channel_id}"
            for channel_id in self.world.chosen_channel_ids
            for _ in range(share.channel_observations_per_channel)
        ]
        self.observations(audiences)

    def add_background(self, count: int) -> None:
        others = [person.id for person in self.world.people[1:]]
        background_channels = [channel.id for channel in self.world.channels[2:]]
        pinned = count * 2 // 100
        private = count * 55 // 100
        group = count * 25 // 100
        observations = count - pinned - private - group
        for _ in range(pinned):
            self.pinned(self.rng.choice(others))
        for _ in range(private):
            self.private_fact(self.rng.choice(others))
        for _ in range(group):
            self.group_fact(self.rng.choice(background_channels))
        audiences: list[str] = []
        for _ in range(observations):
            kind = self.rng.random()
            if kind < 0.60:
                audiences.append(f"person:{self.rng.choice(others)}")
            elif kind < 0.95:
                audiences.append(f"channel:{self.rng.choice(background_channels)}")
            else:
                # Sources of two people: the intersection audience is empty, no `for:` tag.
                audiences.append(f"mixed:{self.rng.choice(others)}:{self.rng.choice(others)}")
        self.observations(audiences)

    # -- entries ----------------------------------------------------------------------------

    def pinned(self, person_id: str) -> None:
        tags = [f"from:{person_id}", f"for:person:{person_id}", f"org:{self.organization_id}"]
        evidence = ItemEvidence(
            chat_id="", item_seq=0, rule=f"person:{person_id}", organization_id=self.organization_id
        )
        self.add(
            Entry.Layer.PINNED,
            tags + self.topic(),
            scope=f"person:{person_id}",
            depth=0,
            evidence=[evidence],
            status=Entry.Status.ACTIVE,
        )

    def private_fact(self, person_id: str) -> None:
        chat_id = self.chat(f"person:{person_id}")
        items = [(chat_id, self.next_seq(chat_id)) for _ in range(self.rng.randint(1, 2))]
        tags = [
            f"from:{person_id}",
            f"for:person:{person_id}",
            f"org:{self.organization_id}",
            f"chat:{chat_id}",
        ]
        self.fact(tags, items, rule=f"person:{person_id}", scope=f"person:{person_id}")

    def group_fact(self, channel_id: str) -> None:
        chat_id = self.chat(f"channel:{channel_id}")
        items = [(chat_id, self.next_seq(chat_id)) for _ in range(self.rng.randint(1, 2))]
        speakers = {self.rng.choice(self.world.members_of[channel_id]) for _ in items}
        tags = [f"from:{speaker}" for speaker in sorted(speakers)] + [
            f"for:channel:{channel_id}",
            f"org:{self.organization_id}",
            f"chat:{chat_id}",
            f"channel:{channel_id}",
        ]
        self.fact(tags, items, rule=f"channel:{channel_id}", scope=f"channel:{channel_id}")

    def fact(self, tags: list[str], items: list[tuple[str, int]], *, rule: str, scope: str) -> None:
        evidence = [
            ItemEvidence(
                chat_id=chat, item_seq=seq, rule=rule, organization_id=self.organization_id
            )
            for chat, seq in items
        ]
        self.add(
            Entry.Layer.FACT,
            tags + self.topic(),
            scope=scope,
            depth=0,
            source_items=items,
            evidence=evidence,
            status=self.status(),
        )

    def observations(self, audiences: list[str]) -> None:
        """Half at depth 1, 30% at depth 2, 20% at depth 3; depth 1 first so sources exist."""
        targets = [1 if i % 10 < 5 else 2 if i % 10 < 8 else 3 for i in range(len(audiences))]
        for depth in (1, 2, 3):
            for audience, target in zip(audiences, targets, strict=True):
                if target == depth:
                    self.observation(audience, depth)

    def observation(self, audience: str, depth: int) -> None:
        kind, _, who = audience.partition(":")
        if kind == "mixed":
            first, second = who.split(":")
            sources = self.pick([f"person:{first}"], 1)[:2] + self.pick([f"person:{second}"], 1)[:2]
            for_tags: list[str] = []
            scope = None
        else:
            scopes = [audience]
            if kind == "person":
                scopes += [f"channel:{channel}" for channel in self.world.channels_of[who]]
            sources = self.pick(scopes, depth)
            for_tags = [f"for:{audience}"]
            scope = audience
        if len(sources) < 2:
            return
        tags = [tag for source in sources for tag in self.inherited[source]] + for_tags
        self.add(
            Entry.Layer.OBSERVATION,
            tags + self.topic(),
            scope=scope,
            depth=1 + max(self.depth[source] for source in sources),
            source_entries=sources,
            confidence=round(self.rng.uniform(0.5, 0.95), 2),
            status=Entry.Status.INVALIDATED if self.rng.random() < 0.03 else Entry.Status.ACTIVE,
        )

    def pick(self, scopes: list[str], depth: int) -> list[str]:
        """2–5 distinct sources from `scopes`, one at depth `depth - 1` (or the deepest)."""
        by_depth: dict[int, list[str]] = defaultdict(list)
        for scope in scopes:
            for level, entry_ids in self.scopes[scope].items():
                by_depth[level] += entry_ids
        levels = [level for level in sorted(by_depth) if level < depth]
        if not levels:
            return []
        anchor = self.rng.choice(by_depth[levels[-1]])
        others = [entry_id for level in levels for entry_id in by_depth[level]]
        count = min(self.rng.randint(2, 5), len(others))
        rest = [entry_id for entry_id in self.rng.sample(others, count) if entry_id != anchor]
        return [anchor, *rest][:count]

    def add(
        self,
        layer: str,
        tags: list[str],
        *,
        scope: str | None,
        depth: int,
        status: str,
        source_items: list[tuple[str, int]] | None = None,
        source_entries: list[str] | None = None,
        evidence: list[ItemEvidence] | None = None,
        confidence: float | None = None,
    ) -> None:
        entry_id = ids.new_id("mem")
        self.entries.append(
            ImportedEntry(
                id=entry_id,
                layer=layer,
                content=self.content(),
                tags=list(dict.fromkeys(tags)),
                status=status,
                source_items=source_items or [],
                source_entries=source_entries or [],
                evidence=evidence or [],
                confidence=confidence,
                updated_at=self.now - self.rng.randrange(YEAR_MS),
            )
        )
        self.depth[entry_id] = depth
        self.inherited[entry_id] = [
            tag for tag in tags if tag.split(":", 1)[0] in ("from", "org", "chat", "channel")
        ]
        if scope is not None:
            self.scopes[scope][depth].append(entry_id)

    # -- small parts ------------------------------------------------------------------------

    def chat(self, owner: str) -> str:
        """One chat per person (private) and per channel (group); only its id is needed."""
        if owner not in self.chat_of:
            self.chat_of[owner] = ids.new_id("chat")
        return self.chat_of[owner]

    def next_seq(self, chat_id: str) -> int:
        self.last_seq[chat_id] += 1
        return self.last_seq[chat_id]

    def topic(self) -> list[str]:
        return [self.rng.choice(TOPICS)] if self.rng.random() < 0.5 else []

    def status(self) -> str:
        roll = self.rng.random()
        if roll < 0.03:
            return Entry.Status.INVALIDATED
        if roll < 0.035:
            return Entry.Status.RETRACTED
        return Entry.Status.ACTIVE

    def content(self) -> str:
        words: list[str] = []
        target = self.rng.randint(40, 240)
        while sum(len(word) + 1 for word in words) < target:
            words.append(self.rng.choice(WORDS))
        return " ".join(words)


def statistics_forget() -> None:
    """[R7] Leave the tables as a new install has them: no planner statistics, as if never
    analyzed (PostgreSQL's `reltuples = -1`). Needs a superuser, as the bench's database has."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        ours = "SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        cursor.execute(f"DELETE FROM pg_statistic WHERE starelid IN ({ours})")  # noqa: S608
        cursor.execute(
            "UPDATE pg_class SET reltuples = -1, relpages = 0, relallvisible = 0"
            " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i')"
        )
