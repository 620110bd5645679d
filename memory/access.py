"""The access rule [V1–V9]: the only code that answers "may this reader see this entry".

A reader is a person reading in an organization, or a reader circle (a channel group, the
readers of an answer in a group chat). Reader X may see entry E iff E is structurally sound
(`Entry.sound`: every reachable source exists, is active and carries evidence, no cycle is
reachable — derived on write by memory.graph) and E *and every entry it depends on* (the
`Closure` rows of E, itself included) passes the local rule:

- (a) the reader is not excluded from it [P1];
- (b) every `org:` tag equals the reader's organization;
- (c) some `for:` tag admits the reader;
- (d) every evidence rule is one the reader satisfies now, in the reader's organization.

[V8] The query reads tags, source references, evidence and exclusions only: content stays
deferred and is decrypted only for the rows a caller returns. Channel membership is read at
the moment of the read [H5]. [V9] This proves access to the sources the memory bot named; it
cannot prove that a model named every input that shaped its answer.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from memory.models import Closure, Entry, EntryTag, Evidence, Exclusion
from openbot.access import channel_ids_of, is_bot_user
from openbot.models import Bot, ChannelMember


@dataclass(frozen=True)
class Reader:
    """Who reads: a person (`person_id`) or a channel group (`circle_id`), in an organization."""

    organization_id: str
    person_id: str | None = None
    circle_id: str | None = None
    # The channels the person is in now [H5]; for a circle, the circle itself.
    channel_ids: frozenset[str] = frozenset()
    # [H6] A current user of the bot; a circle reads through its group chat and admits for:bot.
    bot_user: bool = False

    @classmethod
    def person(cls, *, bot: Bot, person_id: str, organization_id: str) -> "Reader":
        """A person reading `bot`'s memory in `organization_id`, with membership as of now."""
        return cls(
            organization_id=organization_id,
            person_id=person_id,
            channel_ids=frozenset(
                channel_ids_of(person_id=person_id, organization_id=organization_id)
            ),
            bot_user=is_bot_user(bot=bot, person_id=person_id, organization_id=organization_id),
        )

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
        """The evidence rules this reader satisfies now [V4](d)."""
        rules = [f"channel:{channel}" for channel in sorted(self.channel_ids)]
        if self.person_id is not None:
            rules.append(f"person:{self.person_id}")
        return rules

    @property
    def for_tags(self) -> list[str]:
        """The `for:` tags that admit this reader [V4](c)."""
        tags = [f"for:channel:{channel}" for channel in sorted(self.channel_ids)]
        if self.person_id is not None:
            tags.append(f"for:person:{self.person_id}")
        if self.bot_user:
            tags.append("for:bot")
        return tags


def _failing_dependencies(reader: Reader) -> QuerySet[Closure]:
    """Closure rows of the outer entry whose entry fails the local rule for `reader`."""
    entry = OuterRef("ancestor_id")
    admitted = EntryTag.objects.filter(entry_id=entry, tag__in=reader.for_tags)
    foreign_org = EntryTag.objects.filter(entry_id=entry, kind="org").exclude(
        tag=f"org:{reader.organization_id}"
    )
    unmet_evidence = Evidence.objects.filter(entry_id=entry).exclude(
        organization_id=reader.organization_id, rule__in=reader.rules
    )
    failing: Any = ~Exists(admitted) | Exists(foreign_org) | Exists(unmet_evidence)
    if reader.person_id is not None:
        failing |= Exists(Exclusion.objects.filter(entry_id=entry, person_id=reader.person_id))
    return Closure.objects.filter(entry_id=OuterRef("pk")).filter(failing)


def visible_entries(*, pool_id: str, reader: Reader, active_only: bool) -> QuerySet[Entry]:
    """Entries of the pool `reader` may see, content deferred, in memory order [E6].

    `active_only` is active use [V6] (context, enrichment, learning, has_entries); otherwise
    the history view: `invalidated` entries that pass [V4] are included, `retracted` never.
    """
    entries = Entry.objects.filter(pool_id=pool_id, sound=True)
    if active_only:
        entries = entries.filter(status=Entry.Status.ACTIVE)
    else:
        entries = entries.exclude(status=Entry.Status.RETRACTED)
    # The admitted `for:` tag drives the query from the (pool, tag) index, so the cost
    # grows with what the reader may see, not with the pool [Q1].
    candidates = EntryTag.objects.filter(
        pool_id=pool_id, tag__in=reader.for_tags, entry_id=OuterRef("pk")
    )
    return (
        entries.filter(Exists(candidates))
        .filter(~Exists(_failing_dependencies(reader)))
        .defer("content")
        .order_by("rank", "-updated_at", "id")
    )


def visible_ids(*, pool_id: str, reader: Reader, ids: list[str], active_only: bool) -> set[str]:
    """Which of `ids` the reader may see, without reading content [S3, A3]."""
    return set(
        visible_entries(pool_id=pool_id, reader=reader, active_only=active_only)
        .filter(id__in=ids)
        .values_list("id", flat=True)
    )


def audience_allowed(*, source_ids: list[str], audience: str) -> bool:
    """[V5] Whether a `for:` audience satisfies the rule of every source, transitively.

    `for:person:<u>` needs every evidence rule to be `person:<u>` or a channel `u` is in now;
    `for:channel:<c>` needs every rule to be `channel:<c>`; `for:bot` satisfies no evidence
    rule, so it is allowed only where there is none.
    """
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
