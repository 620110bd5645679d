"""[X5] A learning run over a chat with an item no key opens learns from the others: the item
is left out of what the model is shown (and logged by table, id and column), and checking the
sources of what the model proposes reads no item text at all."""

import logging

import pytest

from chats.models import Item
from memorybot.learning import learning_run_process
from memorybot.models import LearningRun
from tests.conftest import World
from tests.factories import ChatFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import (
    bot_item,
    confided_turn,
    fact_change,
    learned,
    learning_answer,
    learning_prompt,
    learning_requests,
    memory_bot_on,
    person_item,
    run_of,
)
from tests.openbot.damage import flip_a_byte


def test_a_run_learns_from_the_items_a_key_opens(
    world: World, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I drink green tea every morning.")
    said, answered = person_item(turn), bot_item(turn)
    flip_a_byte(Item, answered.pk, "text")
    learning_answer(fake_openai, [fact_change("Alice drinks green tea", said)])
    caplog.set_level(logging.WARNING)

    learning_run_process(run_id=run_of(turn).id)

    assert run_of(turn).status == LearningRun.Status.DONE
    (request,) = learning_requests(fake_openai)
    prompt = learning_prompt(request)
    assert f"[{chat.id} {said.public_id}]" in prompt
    assert f"[{chat.id} {answered.public_id}]" not in prompt
    assert [entry.content for entry in learned(chat)] == ["Alice drinks green tea"]
    # Logged each time it is read: for the request, and for the bot's words at apply [W1].
    assert {r.getMessage() for r in caplog.records if r.name == "openbot.fields"} == {
        f"left out a row no key opens: table=chats_item id={answered.pk} column=text"
    }
