"""[W7, W1, E3, V5, W6] What learning refuses: each proposed change is checked on its own; a
refused change is recorded on the run with its reason and writes nothing, and the rest of the
same answer still applies. The model's answers come from the fake server over real HTTP."""

from dataclasses import dataclass
from typing import Any

import pytest

from chats.models import Chat
from memory.models import Entry, EntryTag
from memorybot.learning import learning_run_process
from memorybot.models import Confession, LearningRun
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact
from tests.memorybot.learning_world import (
    Scene,
    confided_turn,
    fact_change,
    learned,
    learning_answer,
    learning_prompt,
    learning_requests,
    learning_scene,
    memory_bot_on,
    observation_change,
    person_item,
    run_of,
    tags_of,
)


@dataclass
class GroupScene(Scene):
    """The learning scene, and a group fact of alice's channel in the pool."""

    group: Entry


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> GroupScene:
    base = learning_scene(world, "Please move my dentist visit, I hate Fridays.")
    group_chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [ItemFactory.create(chat=group_chat, person=world.carol.person)],
        content="the team meets on mondays",
    )
    return GroupScene(**vars(base), group=group)


def learn(fake: FakeOpenAI, run: LearningRun, changes: list[Any]) -> LearningRun:
    learning_answer(fake, changes)
    learning_run_process(run_id=run.id)
    run.refresh_from_db()
    return run


def test_each_refused_change_is_recorded_and_the_rest_apply(
    world: World, fake_openai: FakeOpenAI, scene: GroupScene
) -> None:
    alice = world.alice.person.id
    other_chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    elsewhere = ItemFactory.create(chat=other_chat, person=world.alice.person)
    proposed: list[tuple[Any, str | None]] = [
        # [W1] A tool result may support a fact a person's item is also a source of.
        (
            fact_change(
                "alice's dentist visit is on friday",
                scene.said,
                scene.tool_result,
                topics=["health"],
            ),
            None,
        ),
        # [E3] Colon tags belong to OpenBot; topics are lowercase, digits, single hyphens.
        (fact_change("x", scene.said, topics=["for:bot"]), "colon_tag"),
        (fact_change("x", scene.said, topics=[f"from:{alice}"]), "colon_tag"),
        (fact_change("x", scene.said, topics=["Health"]), "bad_topic"),
        (fact_change("x", scene.said, topics=["-health"]), "bad_topic"),
        (fact_change("x", scene.said, topics=["health-"]), "bad_topic"),
        (fact_change("x", scene.said, topics=["health--care"]), "bad_topic"),
        (fact_change("x", scene.said, topics=["dental care"]), "bad_topic"),
        (fact_change("x", scene.said, topics=[7]), "bad_topic"),  # type: ignore[list-item]
        (fact_change("x", scene.said, topics=["a" * 65]), "bad_topic"),
        # [W1] The bot's words only show where to look; they never become memory.
        (fact_change("x", scene.said, scene.answered), "bot_words_as_source"),
        (fact_change("x", scene.answered), "bot_words_as_source"),
        # [W1, C2] Notices and tool results are never a person's words, alone or together.
        (fact_change("x", scene.notice), "no_person_source"),
        (fact_change("x", scene.tool_result), "no_person_source"),
        (fact_change("x", scene.notice, scene.tool_result), "no_person_source"),
        # [W7] Sources outside the run's range: another chat, an item past the turn's end.
        (fact_change("x", elsewhere), "source_outside_range"),
        (
            {**fact_change("x"), "sources": [{"chat": scene.chat.id, "item": "i-99"}]},
            "source_outside_range",
        ),
        (
            {**fact_change("x"), "sources": [{"chat": scene.chat.id, "item": "i-0"}]},
            "source_outside_range",
        ),
        (
            {**fact_change("x"), "sources": [{"chat": scene.chat.id, "item": "3"}]},
            "source_outside_range",
        ),
        (
            {**fact_change("x"), "sources": [{"chat": scene.chat.id, "item": "i-²"}]},
            "source_outside_range",
        ),
        ({**fact_change("x"), "sources": ["i-3"]}, "source_outside_range"),
        (fact_change("x"), "no_sources"),
        ({**fact_change("", scene.said)}, "bad_content"),
        ({**fact_change("x", scene.said), "content": {"text": "x"}}, "bad_content"),
        # [W7, V7] Entry sources must be active and visible to the run's readers now.
        (observation_change("x", scene.bobs.id), "source_not_visible"),
        (observation_change("x", scene.old.id), "source_not_visible"),
        (observation_change("x", "mem_doesnotexist"), "source_not_visible"),
        (observation_change("x", scene.mine.id, scene.bobs.id), "source_not_visible"),
        ({**observation_change("x"), "sources": [{"entry": 5}]}, "source_not_visible"),
        ({**observation_change("x"), "sources": []}, "no_sources"),
        # [W7] Confidence is a number from 0 to 1.
        (observation_change("x", scene.mine.id, confidence=1.5), "bad_confidence"),
        (observation_change("x", scene.mine.id, confidence=-0.1), "bad_confidence"),
        (observation_change("x", scene.mine.id, confidence="high"), "bad_confidence"),
        (observation_change("x", scene.mine.id, confidence="0.5"), "bad_confidence"),
        (observation_change("x", scene.mine.id, confidence=True), "bad_confidence"),
        (observation_change("x", scene.mine.id, confidence=None), "bad_confidence"),
        ({**observation_change("x", scene.mine.id), "confidence": [0.5]}, "bad_confidence"),
        # [V5] An audience wider than every source allows is refused, whatever the reason.
        (observation_change("x", scene.mine.id, audience="bot"), "audience_too_wide"),
        (
            observation_change(
                "x", scene.group.id, audience="bot", reason="the owner allows sharing"
            ),
            "audience_too_wide",
        ),
        (observation_change("x", scene.mine.id, audience="channel"), "bad_audience"),
        (observation_change("x", scene.mine.id, audience="everyone"), "bad_audience"),
        # [V5] Over a group fact and alice's own fact: for alice only (she passes both rules).
        (
            observation_change(
                "alice drinks tea in meetings", scene.mine.id, scene.group.id, confidence=1
            ),
            None,
        ),
        (observation_change("the team likes mondays", scene.group.id, confidence=0), None),
        # Unknown change kinds.
        ({"kind": "delete", "id": scene.mine.id}, "unknown_change"),
        ({**fact_change("x", scene.said), "layer": "pinned"}, "unknown_change"),
        ({"id": scene.mine.id}, "unknown_change"),
        ("remember everything", "not_a_change"),
        # Edits of entries the readers may not use, or with OpenBot's tags.
        ({"kind": "invalidate", "id": scene.bobs.id}, "source_not_visible"),
        ({"kind": "invalidate", "id": scene.old.id}, "source_not_visible"),
        ({"kind": "invalidate", "id": None}, "source_not_visible"),
        ({"kind": "topics", "id": scene.bobs.id, "add": ["x"], "remove": []}, "source_not_visible"),
        ({"kind": "topics", "id": scene.mine.id, "add": ["org:x"], "remove": []}, "colon_tag"),
        (
            {"kind": "topics", "id": scene.mine.id, "add": [], "remove": [f"for:person:{alice}"]},
            "colon_tag",
        ),
        ({"kind": "topics", "id": scene.mine.id, "add": "drinks"}, "bad_topic"),
        ({"kind": "rename", "from": "health", "to": "for:bot"}, "colon_tag"),
        ({"kind": "rename", "from": "Health", "to": "care"}, "bad_topic"),
        ({"kind": "rename", "from": None, "to": "care"}, "bad_topic"),
        # Valid edits.
        ({"kind": "topics", "id": scene.mine.id, "add": ["drinks"], "remove": []}, None),
    ]

    run = learn(fake_openai, run_of(scene.turn), [change for change, _ in proposed])

    assert run.status == LearningRun.Status.DONE and run.error == ""
    assert run.refusals == [
        {"change": index, "reason": reason}
        for index, (_, reason) in enumerate(proposed)
        if reason is not None
    ]
    # The rest applied: one fact and two observations, with OpenBot's own tags [W7].
    new = learned(scene.chat)
    assert [entry.content for entry in new] == ["alice's dentist visit is on friday"]
    assert tags_of(new[0]) == {
        f"from:{alice}",
        f"for:person:{alice}",
        f"org:{world.org.id}",
        f"chat:{scene.chat.id}",
        "app:lookup",  # [E3] `app:<tool>`: the tool whose result supports it
        "health",
    }
    observations = sorted(
        Entry.objects.filter(layer=Entry.Layer.OBSERVATION), key=lambda entry: entry.content
    )
    assert [(o.content, o.confidence) for o in observations] == [
        ("alice drinks tea in meetings", 1.0),
        ("the team likes mondays", 0.0),
    ]
    mixed, team = observations
    group_chat = scene.group.source_rows.get().chat_id
    assert tags_of(mixed) == {
        f"from:{alice}",
        f"from:{world.carol.person.id}",
        f"org:{world.org.id}",
        f"chat:{scene.mine.source_rows.get().chat_id}",
        f"chat:{group_chat}",
        f"channel:{world.channel.id}",
        f"for:person:{alice}",
    }
    assert f"for:channel:{world.channel.id}" in tags_of(team)
    assert "drinks" in tags_of(scene.mine)
    # Nothing refused was written: no other entry, no tag on bob's or the old entry.
    assert Entry.objects.count() == 4 + 3
    assert Entry.objects.get(id=scene.bobs.id).status == Entry.Status.ACTIVE
    assert not EntryTag.objects.filter(tag__in=["care", "x"]).exists()
    # [W4] The read position moved to the end of the turn with the apply.
    assert Chat.objects.get(id=scene.chat.id).read_position == scene.turn.end_seq


def test_sources_before_the_read_position_are_outside_the_range(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[W1, W4] A later run reads only what came after the chat's read position."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first = confided_turn(chat, world.alice, "I live in Lyon.")
    run = learn(
        fake_openai, run_of(first), [fact_change("alice lives in lyon", person_item(first))]
    )
    assert run.refusals == [] and Chat.objects.get(id=chat.id).read_position == first.end_seq

    second = confided_turn(chat, world.alice, "I moved to Nantes.")
    run = learn(
        fake_openai,
        run_of(second),
        [
            fact_change("alice lives in lyon", person_item(first)),
            fact_change("alice moved to nantes", person_item(second)),
        ],
    )

    assert run.refusals == [{"change": 0, "reason": "source_outside_range"}]
    assert [entry.content for entry in learned(chat)] == [
        "alice lives in lyon",
        "alice moved to nantes",
    ]
    assert run.start_seq == first.end_seq and run.end_seq == second.end_seq


def test_an_observation_in_a_group_chat_stays_with_the_group(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[V5, W5] In a group chat the readers are the channel group: alice's private entries are
    not sources it may use, and the group's conclusions go no wider than the group."""
    memory_bot_on(world)
    private = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot), person=world.alice.person
            )
        ]
    )
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    turn = confided_turn(chat, world.carol, "We ship on Thursdays.")
    group = learn(
        fake_openai, run_of(turn), [fact_change("the team ships on thursdays", person_item(turn))]
    )
    assert group.refusals == []
    (shipped,) = learned(chat)
    assert tags_of(shipped) >= {
        f"from:{world.carol.person.id}",
        f"for:channel:{world.channel.id}",
        f"channel:{world.channel.id}",
    }
    assert not any(tag.startswith("for:person:") for tag in tags_of(shipped))

    again = confided_turn(chat, world.alice, "Thursday again!")
    run = learn(
        fake_openai,
        run_of(again),
        [
            observation_change("x", private.id),
            observation_change("x", shipped.id, audience="bot"),
            observation_change("the team ships weekly", shipped.id, audience="channel"),
        ],
    )

    assert run.refusals == [
        {"change": 0, "reason": "source_not_visible"},
        {"change": 1, "reason": "audience_too_wide"},
    ]
    weekly = Entry.objects.get(layer=Entry.Layer.OBSERVATION)
    assert f"for:channel:{world.channel.id}" in tags_of(weekly)


def test_an_unusable_answer_fails_the_run_and_keeps_the_read_position(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "Note this.")
    fake_openai.reply(content="I would remember that alice said so.")

    learning_run_process(run_id=run_of(turn).id)

    run = run_of(turn)
    assert run.status == LearningRun.Status.FAILED
    assert run.error == LearningRun.Error.BAD_OUTPUT
    assert Chat.objects.get(id=chat.id).read_position == 0
    assert learned(chat) == []


def test_the_learning_request_holds_the_confession_as_the_bots_words(
    world: World, fake_openai: FakeOpenAI, scene: GroupScene
) -> None:
    """[W1] The bot's words show the memory bot where to look: its confession is in the
    request, marked as the bot's own words that never become memory."""
    [confession] = Confession.objects.filter(turn=scene.turn)
    learn(fake_openai, run_of(scene.turn), [])
    [request] = learning_requests(fake_openai)
    prompt = learning_prompt(request)
    marker = "the bot's own words: they only show where to look and never become memory"
    assert marker in prompt
    assert f"- {confession.text}" in prompt.split(marker, 1)[1].split("New items:", 1)[0]


def test_a_change_that_is_only_the_bots_words_is_refused(
    world: World, fake_openai: FakeOpenAI, scene: GroupScene
) -> None:
    """[W1] No entry's content is the bot's words, even with a person's item as its source."""
    [confession] = Confession.objects.filter(turn=scene.turn)
    run = learn(
        fake_openai,
        run_of(scene.turn),
        [
            fact_change(f"  {confession.text.upper()} ", scene.said),
            fact_change(scene.answered.text, scene.said),
            fact_change("alice hates fridays", scene.said),
        ],
    )
    assert run.refusals == [
        {"change": 0, "reason": "bot_words_as_content"},
        {"change": 1, "reason": "bot_words_as_content"},
    ]
    assert [entry.content for entry in learned(scene.chat)] == ["alice hates fridays"]
    assert run.applied == 1
