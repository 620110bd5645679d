"""Learned changes: the write side of the access rule.

The memory bot proposes changes; this module alone decides what they become. It takes the
proposals and the evidence as plain data (the items of the range still to learn, with their
seq, kind and turn person; the chat, its channel and organization; what the bot said) and
builds every OpenBot-owned tag (`from:`, `for:`, `org:`, `chat:`, `channel:`, `app:`) and
evidence row itself [W7]. A proposal may only name sources the run's reader may use now [W6],
and an observation only an audience every source allows; anything else is refused with
a reason code, never applied in part. Memory never reads chats: the caller hands the items in.

What is learned stays what people stated, once: content that addresses the assistant
with instructions is refused (`instruction_like`, `memory.notes`), and a fact equal after
normalization to an active entry with the same people, audience and organization (`from:`,
`for:`, `org:` tags) that the run's reader may see is not added again: it is refused as
`duplicate` and the existing entry stays as it is, its sources unchanged. The equal entry is
found by its stored content key, so nothing is decrypted to find it.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from memory.access import Reader, audience_allowed, visible_ids
from memory.models import Entry, EntryTag
from memory.notes import content_key, instruction_like
from memory.services import (
    MAX_CONTENT,
    ItemEvidence,
    PoolChange,
    entry_create_in,
    entry_set_status_in,
    entry_topics_in,
    tag_kind,
    topic_rename_in,
)
from memory.topics import topics_of

# The chat item kinds learning knows (the values of `chats.models.Item.Kind`).
PERSON, TOOL_RESULT, NOTICE = "person", "tool_result", "notice"
# [W1] A fact's sources: a person's words, a tool result or a notice; never the bot's words.
SOURCE_KINDS = frozenset({PERSON, TOOL_RESULT, NOTICE})
# The OpenBot-owned tags an observation carries over from its sources, so purge reaches it.
INHERITED_KINDS = ("from", "org", "chat", "channel", "app")
ITEM_ID = re.compile(r"i-([0-9]{1,9})")
# The tags that say whose an entry is and who reads it: equal entries share all of them.
OWNER_KINDS = frozenset({"from", "for", "org"})
# Why a proposed change was refused: the codes a run records.
REFUSAL_CODES = (
    "not_a_change",
    "unknown_change",
    "bad_content",
    "bot_words_as_content",
    "instruction_like",
    "duplicate",
    "bad_topic",
    "colon_tag",
    "no_sources",
    "source_outside_range",
    "source_missing",
    "bot_words_as_source",
    "no_person_source",
    "not_learnable",
    "source_not_visible",
    "bad_confidence",
    "bad_audience",
    "audience_too_wide",
)


@dataclass(frozen=True)
class ChatPlace:
    """Where a chat's items were said: the chat, its owner, organization and channel group."""

    chat_id: str
    organization_id: str
    owner_id: str
    channel_id: str | None = None

    def rule_for(self, person_id: str | None) -> str:
        """[V2] The access rule of an item said here by `person_id`: the channel of a
        group chat, else the person (the chat's owner for an item no person said)."""
        if self.channel_id is not None:
            return f"channel:{self.channel_id}"
        return f"person:{person_id or self.owner_id}"


@dataclass(frozen=True)
class SourceItem:
    """A chat item as learning may name it: metadata only, its text is never needed."""

    seq: int
    kind: str
    # The person of the item's turn; None for an item of no person's turn.
    person_id: str | None = None
    # For a tool result: the tool (else the app) it came from.
    tool: str | None = None
    # False for an item of a person who opted out, or of a channel with learning off.
    learnable: bool = True
    # When it was said (ms).
    said_at: int | None = None


@dataclass(frozen=True)
class LearningRange:
    """What one learning run may learn from: the items `first_seq`..`last_seq` of a chat
    (every stored item of that range, whatever its kind) and what the bot said in it."""

    place: ChatPlace
    first_seq: int
    last_seq: int
    items: Sequence[SourceItem]
    # The bot's words (its confessions and messages): a change that is only those words
    # is refused.
    bot_words: Sequence[str] = ()


@dataclass(frozen=True)
class Refusal:
    """A proposed change that was not applied: its index in the proposals and why."""

    change: int
    reason: str


class Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Learning:
    change: PoolChange
    within: LearningRange
    reader: Reader
    items: dict[int, SourceItem]
    bot_words: frozenset[str]


def learned_changes_apply_in(
    change: PoolChange, *, proposals: Sequence[Any], within: LearningRange, reader: Reader
) -> list[Refusal]:
    """Apply each proposed change that may be applied, each on its own or not at
    all, inside the caller's `pool_change`; returns the refusals. `reader` is who the run
    learns for; their rights are read again here, under the pool's write lock."""
    state = _Learning(
        change=change,
        within=within,
        reader=reader.as_of_now(),
        items={item.seq: item for item in within.items},
        bot_words=frozenset(_words(text) for text in within.bot_words),
    )
    refusals: list[Refusal] = []
    for index, proposed in enumerate(proposals):
        try:
            with transaction.atomic():
                _apply_one(state, proposed)
        except Refused as refusal:
            refusals.append(Refusal(change=index, reason=refusal.reason))
    return refusals


def fact_create_in(
    change: PoolChange,
    *,
    place: ChatPlace,
    items: Sequence[SourceItem],
    content: str,
    topics: Sequence[str] = (),
) -> Entry:
    """A fact from `items` of one chat, with the tags and evidence OpenBot
    derives (`fact_tags`)."""
    items = sorted(items, key=lambda item: item.seq)
    tags, evidence = fact_tags(place=place, items=items)
    return entry_create_in(
        change,
        layer=Entry.Layer.FACT,
        content=content,
        tags=tags + list(topics),
        source_items=[(place.chat_id, item.seq) for item in items],
        evidence=evidence,
        said_at=min((item.said_at for item in items if item.said_at), default=None),
    )


def fact_tags(
    *, place: ChatPlace, items: Sequence[SourceItem]
) -> tuple[list[str], list[ItemEvidence]]:
    """The OpenBot-owned tags and the evidence of a fact from `items`: `from:`
    each person who said one, `app:` each tool result's tool, `for:` the rule of each item,
    the organization, chat and channel."""
    tags: list[str] = []
    evidence: list[ItemEvidence] = []
    for item in items:
        if item.kind == PERSON:
            tags.append(f"from:{item.person_id}")
        if item.kind == TOOL_RESULT and item.tool:
            tags.append(f"app:{item.tool}")
        evidence.append(
            ItemEvidence(
                chat_id=place.chat_id,
                item_seq=item.seq,
                rule=place.rule_for(item.person_id),
                organization_id=place.organization_id,
            )
        )
    tags += sorted({f"for:{proof.rule}" for proof in evidence})
    tags += [f"org:{place.organization_id}", f"chat:{place.chat_id}"]
    if place.channel_id is not None:
        tags.append(f"channel:{place.channel_id}")
    return tags, evidence


def observation_create_in(
    change: PoolChange,
    *,
    source_ids: Sequence[str],
    audience: Sequence[str],
    content: str,
    confidence: float,
    topics: Sequence[str] = (),
) -> Entry:
    """An observation over `source_ids` for `audience` (its `for:` tags), carrying
    the `from:`, `org:`, `chat:`, `channel:`, `app:` tags of all its sources so purge
    reaches it. Whether the audience is allowed is the caller's to check."""
    inherited = (
        EntryTag.objects.filter(entry_id__in=source_ids, kind__in=INHERITED_KINDS)
        .order_by("id")
        .values_list("tag", flat=True)
    )
    return entry_create_in(
        change,
        layer=Entry.Layer.OBSERVATION,
        content=content,
        tags=[*dict.fromkeys(inherited), *audience, *topics],
        source_entries=list(source_ids),
        confidence=confidence,
    )


def _apply_one(state: _Learning, proposed: Any) -> None:
    if not isinstance(proposed, dict):
        raise Refused("not_a_change")
    kind = proposed.get("kind")
    if kind == "add" and proposed.get("layer") == "fact":
        _add_fact(state, proposed)
    elif kind == "add" and proposed.get("layer") == "observation":
        _add_observation(state, proposed)
    elif kind == "invalidate":
        entry_id = _visible_entry(state, proposed.get("id"))
        entry_set_status_in(state.change, entry_id=entry_id, status=Entry.Status.INVALIDATED)
    elif kind == "topics":
        entry_id = _visible_entry(state, proposed.get("id"))
        entry_topics_in(
            state.change,
            entry_id=entry_id,
            add=_topics(proposed.get("add", [])),
            remove=_topics(proposed.get("remove", [])),
        )
    elif kind == "rename":
        old, new = _topics([proposed.get("from")]), _topics([proposed.get("to")])
        topic_rename_in(state.change, old=old[0], new=new[0])
    else:
        raise Refused("unknown_change")


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


def _topics(value: Any) -> list[str]:
    """Topics only, in NFC: colon tags and bad topics are refused."""
    if not isinstance(value, list) or not all(isinstance(topic, str) for topic in value):
        raise Refused("bad_topic")
    if any(":" in topic for topic in value):
        raise Refused("colon_tag")
    topics = topics_of(value)
    if topics is None:
        raise Refused("bad_topic")
    return topics


def _content(state: _Learning, proposed: dict[str, Any]) -> str:
    content = proposed.get("content")
    if not isinstance(content, str) or not content.strip() or len(content) > MAX_CONTENT:
        raise Refused("bad_content")
    if _words(content) in state.bot_words:
        raise Refused("bot_words_as_content")  # the bot's words point; they never become memory
    if instruction_like(content):
        raise Refused("instruction_like")  # memory is data, never instructions
    return content.strip()


def _refuse_duplicate(state: _Learning, content: str, tags: Sequence[str]) -> None:
    """[K5] Refuse a new entry equal to an active one with the same people, audience and
    organization that the run's reader may see (under the pool's write lock, so the entries
    of this change and of runs that committed before it count too)."""
    owners = {tag for tag in tags if tag_kind(tag) in OWNER_KINDS}
    pool_id = state.change.pool_id
    equal = Entry.objects.filter(
        bot_id=pool_id,
        content_key=content_key(pool_id=pool_id, content=content),
        status=Entry.Status.ACTIVE,
    ).values_list("id", flat=True)
    tagged: dict[str, set[str]] = {entry_id: set() for entry_id in equal}
    if not tagged:
        return
    rows = EntryTag.objects.filter(entry_id__in=list(tagged), kind__in=OWNER_KINDS)
    for entry_id, tag in rows.values_list("entry_id", "tag"):
        tagged[entry_id].add(tag)
    same = [entry_id for entry_id, found in tagged.items() if found == owners]
    if same and visible_ids(pool_id=pool_id, reader=state.reader, ids=same, active_only=True):
        raise Refused("duplicate")


def _visible_entry(state: _Learning, entry_id: Any) -> str:
    """An entry the run's reader may use now: active, visible, newest state."""
    if not isinstance(entry_id, str) or not visible_ids(
        pool_id=state.change.pool_id, reader=state.reader, ids=[entry_id], active_only=True
    ):
        raise Refused("source_not_visible")
    return entry_id


def _add_fact(state: _Learning, proposed: dict[str, Any]) -> None:
    """A fact: its sources are items of the range still to learn, among them a
    person's; OpenBot builds its tags and evidence from the items' stored metadata."""
    content, topics = _content(state, proposed), _topics(proposed.get("topics", []))
    sources = proposed.get("sources")
    if not isinstance(sources, list) or not sources:
        raise Refused("no_sources")
    within = state.within
    place = within.place
    seqs: list[int] = []
    for source in sources:
        item = source.get("item") if isinstance(source, dict) else None
        # ASCII digits only: str.isdigit() also accepts "²", which int() cannot read.
        found = ITEM_ID.fullmatch(item) if isinstance(item, str) else None
        if not isinstance(source, dict) or source.get("chat") != place.chat_id or found is None:
            raise Refused("source_outside_range")
        seqs.append(int(found.group(1)))
    seqs = list(dict.fromkeys(seqs))
    if any(seq < within.first_seq or seq > within.last_seq for seq in seqs):
        raise Refused("source_outside_range")
    items = [state.items[seq] for seq in seqs if seq in state.items]
    if len(items) != len(seqs):
        raise Refused("source_missing")
    if any(item.kind not in SOURCE_KINDS for item in items):
        raise Refused("bot_words_as_source")  # the bot's words never become memory
    if not all(item.learnable for item in items):
        raise Refused("not_learnable")  # [D4] "don't learn from me", or the channel's say
    people = [item.person_id for item in items if item.kind == PERSON]
    if not people or None in people:
        raise Refused("no_person_source")  # tool results and notices never alone
    tags, _ = fact_tags(place=place, items=items)
    _refuse_duplicate(state, content, tags)
    fact_create_in(state.change, place=place, items=items, content=content, topics=topics)


def _add_observation(state: _Learning, proposed: dict[str, Any]) -> None:
    """An observation over entries the run's reader may see, for an audience every
    source allows: the `for:` tags all sources share, else the reader's own."""
    content, topics = _content(state, proposed), _topics(proposed.get("topics", []))
    confidence = proposed.get("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        raise Refused("bad_confidence")
    sources = proposed.get("sources")
    if not isinstance(sources, list) or not sources:
        raise Refused("no_sources")
    source_ids = [source.get("entry") if isinstance(source, dict) else None for source in sources]
    if not all(isinstance(source_id, str) for source_id in source_ids):
        raise Refused("source_not_visible")
    ids = list(dict.fromkeys(str(source_id) for source_id in source_ids))
    if set(ids) != visible_ids(
        pool_id=state.change.pool_id, reader=state.reader, ids=ids, active_only=True
    ):
        raise Refused("source_not_visible")
    audience = _audience(state, proposed.get("audience"), ids)
    if not all(audience_allowed(source_ids=ids, audience=tag) for tag in audience):
        raise Refused("audience_too_wide")
    observation_create_in(
        state.change,
        source_ids=ids,
        audience=audience,
        content=content,
        confidence=float(confidence),
        topics=topics,
    )


def _audience(state: _Learning, wanted: Any, source_ids: list[str]) -> list[str]:
    """The `for:` tags of a new observation: as asked (`bot`, `channel`), else those all its
    sources share, else the reader's own."""
    channel_id = state.within.place.channel_id
    if wanted == "bot":
        return ["for:bot"]
    if wanted == "channel" and channel_id is not None:
        return [f"for:channel:{channel_id}"]
    if wanted is not None:
        raise Refused("bad_audience")
    for_sets: dict[str, set[str]] = {source_id: set() for source_id in source_ids}
    rows = EntryTag.objects.filter(entry_id__in=source_ids, kind="for")
    for source_id, tag in rows.values_list("entry_id", "tag"):
        for_sets[source_id].add(tag)
    common = sorted(set.intersection(*for_sets.values()))
    if common:
        return common
    if state.reader.circle_id is not None:
        return [f"for:channel:{state.reader.circle_id}"]
    return [f"for:person:{state.reader.person_id}"]
