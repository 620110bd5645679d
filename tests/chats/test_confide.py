"""[F1–F4, B1, C1, W8] Confide over HTTP, with the bot's model and the memory bot on the fake
OpenAI-compatible server: where the tool is offered and how it reads, how the memory bot
hears a confession, what is stored, and when a confession starts learning.
"""

import json
from typing import Any

import pytest
from django.db import connection

from conversations.turns import BOT_PROMPT, NO_ANSWER
from memorybot.confide import CALM_REPLY, CONFIDE_TOOL, PRIEST_PROMPT
from memorybot.models import Confession, LearningRun, ModelCall
from openbot import services
from openbot.models import Bot
from tests.conftest import World
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    OFFLINE_MODEL,
    bot_model_set,
    bot_requests,
    chat_open,
    confide_call,
    confide_requests,
    enrichment_answer,
    memory_bot_requests,
    memory_model_set,
    take_turn,
    tool_answers,
)

WORDS = "Please book the train to Basel for Friday morning."
CONFESSION = "I booked the wrong day. I feel bad about it."
HEARD = "I hear you. A mistake is part of the work; tell the person openly and repair it."
# Words that would tell the bot its confessions lead to memory [F1, N3].
MEMORY_WORDS = ("memory", "memories", "remember", "memoris", "learn")


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    return world


def confiding_turn(world: World, fake_openai: FakeOpenAI, chat_id: str) -> dict[str, Any]:
    """A turn in which the bot confides once and then answers."""
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content=HEARD)
    fake_openai.reply(content="Booked for Friday.")
    return take_turn(world.alice, chat_id, WORDS)


# --- the tool [F1, C1] ----------------------------------------------------------------------


def test_a_chat_offers_the_confide_tool(scene: World, fake_openai: FakeOpenAI) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    [request] = bot_requests(fake_openai)
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "confide",
                "description": CONFIDE_TOOL.description,
                "parameters": dict(CONFIDE_TOOL.parameters),
            },
        }
    ]
    description = CONFIDE_TOOL.description
    for feeling in ("stuck", "unsure", "sad", "proud", "mistake"):
        assert feeling in description


def test_a_test_chat_offers_no_confide_and_learns_nothing(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.alice, scene.bot, test=True)
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    # Even a model that calls the tool anyway is not heard.
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    first, second, third = bot_requests(fake_openai)
    for request in (first, second, third):
        assert "tools" not in request.body
    assert tool_answers(third) == ["There is no tool named 'confide'."]
    assert confide_requests(fake_openai) == []
    assert Confession.objects.count() == 0
    assert LearningRun.objects.count() == 0


def test_nothing_the_bots_model_sees_mentions_memory(scene: World, fake_openai: FakeOpenAI) -> None:
    entry = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Alice travels first class."
    )
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(f"{WORDS} First class.", [entry.id]))
    confiding_turn(scene, fake_openai, chat_id)
    fake_openai.reply(content=enrichment_answer("Thanks!", []))
    fake_openai.reply(**confide_call("I am proud of that booking."))
    fake_openai.reply(content="That went well.")
    fake_openai.reply(content="You are welcome.")
    take_turn(scene.alice, chat_id, "Thanks!")

    requests = bot_requests(fake_openai)
    assert len(requests) == 4
    for request in requests:
        seen = json.dumps(request.body).casefold()
        for word in MEMORY_WORDS:
            assert word not in seen, word
    for text in (BOT_PROMPT, CONFIDE_TOOL.description, json.dumps(CONFIDE_TOOL.parameters)):
        assert not any(word in text.casefold() for word in MEMORY_WORDS)
    for text in (CALM_REPLY, NO_ANSWER):
        assert not any(word in text.casefold() for word in MEMORY_WORDS)


# --- hearing a confession [F2, F3] ----------------------------------------------------------


def test_the_memory_bot_hears_a_confession_like_a_priest(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    body = confiding_turn(scene, fake_openai, chat_id)
    [heard] = confide_requests(fake_openai)
    assert heard.body["messages"] == [
        {"role": "system", "content": PRIEST_PROMPT},
        {"role": "user", "content": CONFESSION},
    ]
    assert "tools" not in heard.body
    for duty in ("do not judge", "a mistake is part of the work", "tell the person openly"):
        assert duty in PRIEST_PROMPT.casefold()
    assert "repair what it can" in PRIEST_PROMPT and "Do not give it new tasks" in PRIEST_PROMPT

    # The bot gets the reply at once, in the same turn.
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == [HEARD]
    assert body["items"][-1]["text"] == "Booked for Friday."
    confession = Confession.objects.get()
    assert (confession.text, confession.reply) == (CONFESSION, HEARD)
    assert confession.turn_id == int(body["turn"]["id"])
    assert ModelCall.objects.get(purpose="confide").status == "ok"


def test_confessions_are_encrypted_and_listed_for_the_owner(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    body = confiding_turn(scene, fake_openai, chat_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT text, reply FROM memorybot_confession")
        [(text, reply)] = cursor.fetchall()
    assert "wrong day" not in text and "mistake" not in reply
    assert "wrong day" not in str(Confession.objects.get())

    listed = scene.alice.client().get(f"/v1/chats/{chat_id}/confessions")
    assert listed.status_code == 200
    [shown] = listed.json()["confessions"]
    assert shown["turn"] == body["turn"]["id"]
    assert (shown["text"], shown["reply"]) == (CONFESSION, HEARD)
    assert isinstance(shown["createdAt"], int)


def test_the_offline_memory_bot_hears_end_to_end(scene: World, fake_openai: FakeOpenAI) -> None:
    memory_model_set(scene.org, OFFLINE_MODEL)
    bot_model_set(scene.bot, OFFLINE_MODEL)  # the offline bot confides once per turn
    chat_id = chat_open(scene.alice, scene.bot)
    body = take_turn(scene.alice, chat_id, "I need the Basel train.")
    assert fake_openai.requests == []
    confession = Confession.objects.get()
    assert "I need the Basel train." in confession.text
    assert "A mistake is part of the work" in confession.reply
    assert "Tell the person openly" in confession.reply
    assert confession.reply != CALM_REPLY
    assert body["items"][-1]["kind"] == "bot"
    assert LearningRun.objects.filter(turn_id=confession.turn_id).exists()


@pytest.mark.parametrize("said", [None, "", "   ", 42])
def test_a_confession_with_nothing_in_it_gets_the_calm_reply(
    scene: World, fake_openai: FakeOpenAI, said: object
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    arguments = {} if said is None else {"text": said}
    fake_openai.reply(content=None, tool_calls=[("confide", arguments)])
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    assert confide_requests(fake_openai) == []
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == [CALM_REPLY]


# --- learning runs [F4, W8] -----------------------------------------------------------------


def test_a_confession_stores_one_learning_run_for_its_turn(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content=HEARD)
    fake_openai.reply(**confide_call("And I am still unsure."))
    fake_openai.reply(content=HEARD)
    fake_openai.reply(content="Booked for Friday.")
    body = take_turn(scene.alice, chat_id, WORDS)
    assert Confession.objects.count() == 2
    run = LearningRun.objects.get()
    assert run.turn_id == int(body["turn"]["id"])
    assert run.chat_id == chat_id


def test_a_bot_that_never_confides_learns_nothing(scene: World, fake_openai: FakeOpenAI) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    assert LearningRun.objects.count() == 0


def test_with_bot_memory_off_the_bot_still_gets_an_answer_and_nothing_is_learned(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    services.organization_settings_update(organization=scene.org, bot_memory=False)
    chat_id = chat_open(scene.alice, scene.bot)
    confiding_turn(scene, fake_openai, chat_id)
    assert len(confide_requests(fake_openai)) == 1
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == [HEARD]
    assert Confession.objects.get().reply == HEARD
    assert LearningRun.objects.count() == 0


def test_without_a_model_the_bot_gets_the_calm_reply_and_nothing_is_learned(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    memory_model_set(scene.org, None)
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.alice, chat_id, WORDS)
    assert memory_bot_requests(fake_openai) == []
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == [CALM_REPLY]
    assert (Confession.objects.get().text, Confession.objects.get().reply) == (
        CONFESSION,
        CALM_REPLY,
    )
    assert LearningRun.objects.count() == 0
    assert not ModelCall.objects.filter(purpose="confide").exists()


# --- a shared bot: model and cost come from the chat's organization [B1] -------------------


@pytest.fixture
def linked(scene: World) -> Bot:
    """The bot shared into org B, whose members may chat with it; org B's memory bot uses
    the fake server, org A's has no model."""
    linked = services.bot_link(bot=scene.bot, organization=scene.other_org)
    services.grant_set(bot=linked, level="read", organization=scene.other_org)
    memory_model_set(scene.org, None)
    memory_model_set(scene.other_org, FAKE_MODEL)
    return linked


def test_a_shared_bot_uses_the_chat_organizations_model_and_pays_there(
    scene: World, linked: Bot, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.dave, linked)
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content=HEARD)
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.dave, chat_id, WORDS)
    assert len(confide_requests(fake_openai)) == 1
    call = ModelCall.objects.get(purpose="confide")
    assert call.organization_id == scene.other_org.id
    assert call.bot_id == scene.bot.id  # the source bot's pool and budget
    assert Confession.objects.get().reply == HEARD
    assert LearningRun.objects.filter(chat_id=chat_id).exists()


def test_a_shared_bot_without_a_model_in_the_chats_organization_is_calm(
    scene: World, linked: Bot, fake_openai: FakeOpenAI
) -> None:
    memory_model_set(scene.org, FAKE_MODEL)
    memory_model_set(scene.other_org, None)
    chat_id = chat_open(scene.dave, linked)
    fake_openai.reply(**confide_call(CONFESSION))
    fake_openai.reply(content="Booked for Friday.")
    take_turn(scene.dave, chat_id, WORDS)
    assert memory_bot_requests(fake_openai) == []
    assert Confession.objects.get().reply == CALM_REPLY
    assert LearningRun.objects.count() == 0
