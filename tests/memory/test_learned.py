"""[W1, W6, W7, E3, V5] memory.learned on its own: learned changes handed in as plain data
(no chat stored, no model), the tags and evidence it derives and the changes it refuses."""

from typing import Any

from chats.models import Item
from memory.access import Reader, visible_ids
from memory.learned import (
    NOTICE,
    PERSON,
    SOURCE_KINDS,
    TOOL_RESULT,
    ChatPlace,
    LearningRange,
    Refusal,
    SourceItem,
    learned_changes_apply_in,
)
from memory.models import Change, Entry
from memory.services import pool_change
from tests.conftest import World


def tags_of(entry: Entry) -> set[str]:
    return set(entry.tag_rows.values_list("tag", flat=True))


def apply(world: World, proposals: list[Any], place: ChatPlace) -> list[Refusal]:
    alice = world.alice.person.id
    within = LearningRange(
        place=place,
        first_seq=2,
        last_seq=5,
        items=[
            SourceItem(seq=2, kind="person", person_id=alice),
            SourceItem(seq=3, kind="tool_result", person_id=alice, tool="lookup"),
            SourceItem(seq=4, kind="bot", person_id=alice),
            SourceItem(seq=5, kind="tool_call", person_id=alice),
        ],
        bot_words=["Let me look that up for you."],
    )
    reader = Reader.person(bot=world.bot, person_id=alice, organization_id=world.org.id)
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        return learned_changes_apply_in(change, proposals=proposals, within=within, reader=reader)


def fact(content: str, *seqs: int, chat: str = "chat_1", topics: tuple[str, ...] = ()) -> Any:
    sources = [{"chat": chat, "item": f"i-{seq}"} for seq in seqs]
    return {
        "kind": "add",
        "layer": "fact",
        "content": content,
        "sources": sources,
        "topics": list(topics),
    }


def test_a_fact_gets_the_tags_and_evidence_openbot_derives(world: World) -> None:
    """[W7, E3] `from:` the person, `app:<tool>` of the tool result, `for:` the person whose
    turn it was, the organization and the chat; one evidence row per source item."""
    alice = world.alice.person.id
    place = ChatPlace(chat_id="chat_1", organization_id=world.org.id, owner_id=alice)

    assert apply(world, [fact("Dentist on friday", 3, 2, topics=("health",))], place) == []

    [entry] = Entry.objects.all()
    assert entry.content == "Dentist on friday"
    assert tags_of(entry) == {
        f"from:{alice}",
        "app:lookup",
        f"for:person:{alice}",
        f"org:{world.org.id}",
        "chat:chat_1",
        "health",
    }
    assert sorted(entry.evidence_rows.values_list("chat_id", "item_seq", "rule")) == [
        ("chat_1", 2, f"person:{alice}"),
        ("chat_1", 3, f"person:{alice}"),
    ]
    assert list(entry.source_rows.order_by("position").values_list("item_seq", flat=True)) == [
        2,
        3,
    ]
    reader = Reader.person(bot=world.bot, person_id=alice, organization_id=world.org.id)
    assert visible_ids(pool_id=world.bot.id, reader=reader, ids=[entry.id], active_only=True)


def test_a_group_fact_is_for_the_channel(world: World) -> None:
    """[V3] In a group chat every item's rule is the channel group."""
    place = ChatPlace(
        chat_id="chat_2",
        organization_id=world.org.id,
        owner_id=world.bob.person.id,
        channel_id=world.channel.id,
    )

    assert apply(world, [fact("The team meets at nine", 2, chat="chat_2")], place) == []

    [entry] = Entry.objects.all()
    assert f"for:channel:{world.channel.id}" in tags_of(entry)
    assert f"channel:{world.channel.id}" in tags_of(entry)
    assert set(entry.evidence_rows.values_list("rule", flat=True)) == {
        f"channel:{world.channel.id}"
    }


def test_what_learning_may_not_write_is_refused_per_change(world: World) -> None:
    """[W1, W6, W7, V5] Each refused change names its reason; the others apply."""
    alice = world.alice.person.id
    place = ChatPlace(chat_id="chat_1", organization_id=world.org.id, owner_id=alice)
    proposals = [
        fact("the bot said it", 4, 2),  # the bot's message as a source
        fact("a tool call", 5, 2),
        fact("only a tool result", 3),
        fact("before the range", 1, 2),
        fact("another chat", 2, chat="chat_9"),
        fact("  let me LOOK that up for you. ", 2),  # only the bot's words
        fact("a colon tag", 2, topics=("for:bot",)),
        {"kind": "invalidate", "id": "mem_unknown"},
        "not a change",
        fact("kept", 2),
    ]

    refusals = apply(world, proposals, place)

    assert refusals == [
        Refusal(change=0, reason="bot_words_as_source"),
        Refusal(change=1, reason="bot_words_as_source"),
        Refusal(change=2, reason="no_person_source"),
        Refusal(change=3, reason="source_outside_range"),
        Refusal(change=4, reason="source_outside_range"),
        Refusal(change=5, reason="bot_words_as_content"),
        Refusal(change=6, reason="colon_tag"),
        Refusal(change=7, reason="source_not_visible"),
        Refusal(change=8, reason="not_a_change"),
    ]
    assert [entry.content for entry in Entry.objects.all()] == ["kept"]


def test_an_observation_carries_its_sources_tags_and_no_wider_audience(world: World) -> None:
    """[W7, V5] An observation inherits the where-from tags of its sources and their common
    audience; `for:bot` over a private fact is too wide."""
    alice = world.alice.person.id
    place = ChatPlace(chat_id="chat_1", organization_id=world.org.id, owner_id=alice)
    apply(world, [fact("Dentist on friday", 2, 3)], place)
    [source] = Entry.objects.all()

    def conclusion(audience: str | None) -> dict[str, Any]:
        proposal = {
            "kind": "add",
            "layer": "observation",
            "content": "alice looks after her teeth",
            "sources": [{"entry": source.id}],
            "confidence": 0.5,
            "topics": [],
        }
        return proposal if audience is None else {**proposal, "audience": audience}

    refusals = apply(world, [conclusion("bot"), conclusion("everyone"), conclusion(None)], place)

    assert refusals == [
        Refusal(change=0, reason="audience_too_wide"),
        Refusal(change=1, reason="bad_audience"),
    ]
    observation = Entry.objects.get(layer=Entry.Layer.OBSERVATION)
    assert tags_of(observation) == {
        f"from:{alice}",
        "app:lookup",
        f"org:{world.org.id}",
        "chat:chat_1",
        f"for:person:{alice}",
    }


def test_the_item_kinds_learning_knows_are_the_chats_own() -> None:
    """Memory never imports chats: the kinds it names must stay the values chats stores."""
    assert {PERSON, TOOL_RESULT, NOTICE} == SOURCE_KINDS
    assert set(Item.Kind.values) > SOURCE_KINDS
    assert Item.Kind.BOT not in SOURCE_KINDS and Item.Kind.TOOL_CALL not in SOURCE_KINDS
