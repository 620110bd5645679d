"""[K2] A learning step on the real model server, through the provider's answer forms:
llama-cpp-python's server refuses `json_schema` (HTTP 500 naming `response_format`) and takes
the schema inside `json_object`, so the model answers only with changes of the shape the apply
takes — and from a simple statement, at least one that it applies."""

import json

import jsonschema
import pytest

from memorybot.learning import learning_run_process
from memorybot.learning_step import LEARN_PROMPT
from memorybot.local_model import MODEL as LOCAL_MODEL
from memorybot.models import LearningRun
from tests.conftest import World
from tests.factories import ChatFactory
from tests.memorybot.learning_world import confided_turn, learned, memory_bot_on, run_of
from tests.memorybot.test_answer_schema import SHAPE_REFUSALS
from tests.realmodel.recorder import Recorder

pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]


def test_a_learning_step_with_the_schema_applies_a_change(
    world: World, local_model_calls: Recorder
) -> None:
    memory_bot_on(world, LOCAL_MODEL)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "My sister Anna is a doctor in Munich.")

    learning_run_process(run_id=run_of(turn).id)

    asked = [
        exchange
        for exchange in local_model_calls.exchanges
        if exchange.request["messages"][0]["content"] == LEARN_PROMPT
    ]
    forms = [exchange.request["response_format"] for exchange in asked]
    assert [
        (e.status, form["type"], "schema" in form) for e, form in zip(asked, forms, strict=True)
    ] == [
        (500, "json_schema", False),
        (200, "json_object", True),
    ]
    # Constrained decoding held: the answer is one the schema allows.
    answer = json.loads(asked[1].choice["message"]["content"], strict=False)
    jsonschema.validate(answer, forms[1]["schema"])
    run = run_of(turn)
    assert (run.status, run.error) == (LearningRun.Status.DONE, "")
    assert not {refusal["reason"] for refusal in run.refusals} & SHAPE_REFUSALS
    assert run.applied >= 1, answer
    assert learned(chat)
