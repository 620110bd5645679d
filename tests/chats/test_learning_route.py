"""[A12] `GET /v1/chats/:chatId/learning` (the chat's owner) lists the chat's learning runs,
newest first, with status, what applied, what was refused and why, and a failure's cause —
all codes, never model output or content; the turn response names its run."""

import json
from typing import Any

import pytest

from chats.models import Chat, Turn
from memorybot.learning import learning_run_process
from memorybot.models import LearningRun
from openbot.models import Organization
from tests.conftest import World
from tests.factories import ChatFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    learning_answer,
    memory_bot_on,
    person_item,
    run_of,
)

CANARY = "Canary-7f3a: the blue heron nests by the old mill"


def runs(world: World, chat: Chat) -> list[dict[str, Any]]:
    response = world.alice.client().get(f"/v1/chats/{chat.id}/learning")
    assert response.status_code == 200, response.content
    body: list[dict[str, Any]] = response.json()["runs"]
    return body


def learned_turn(world: World, fake: FakeOpenAI) -> tuple[Chat, Turn]:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, CANARY)
    return chat, turn


def test_a_waiting_run_then_a_done_run_with_applied_and_refused(
    world: World, fake_openai: FakeOpenAI
) -> None:
    chat, turn = learned_turn(world, fake_openai)
    [waiting] = runs(world, chat)
    assert waiting["status"] == "waiting" and waiting["turn"] == str(turn.pk)
    assert waiting["endedAt"] is None and waiting["error"] is None
    learning_answer(
        fake_openai,
        [fact_change("alice saw a heron by the mill", person_item(turn)), {"op": "nonsense"}],
    )
    learning_run_process(run_id=run_of(turn).id)
    [done] = runs(world, chat)
    assert done["status"] == "done" and done["endedAt"] is not None
    assert done["applied"] == 1
    assert done["refused"] == [{"change": 1, "reason": "unknown_change"}]
    assert CANARY not in json.dumps(done) and "heron" not in json.dumps(done)


def test_runs_come_newest_first_and_a_running_one_shows(
    world: World, fake_openai: FakeOpenAI
) -> None:
    chat, first = learned_turn(world, fake_openai)
    second = confided_turn(chat, world.alice, "And the ducks.")
    LearningRun.objects.filter(turn=second).update(status=LearningRun.Status.RUNNING)
    shown = runs(world, chat)
    assert [run["turn"] for run in shown] == [str(second.pk), str(first.pk)]
    assert shown[0]["status"] == "running"


@pytest.mark.parametrize(
    ("model", "reply", "code"),
    [
        ("openai:gpt-test", {"content": "I would remember the heron."}, "bad_output"),
        ("openai:gpt-test", {"status": 500}, "model_error"),
        ("nonsense:model", None, "bad_model"),
    ],
)
def test_a_failed_run_says_why_as_a_code(
    world: World, fake_openai: FakeOpenAI, model: str, reply: Any, code: str
) -> None:
    chat, turn = learned_turn(world, fake_openai)
    # [A15] Services refuse a bad name now; one stored before that still fails the run.
    Organization.objects.filter(pk=world.org.pk).update(bot_memory_model=model)
    if reply is not None:
        fake_openai.reply(**reply)
    learning_run_process(run_id=run_of(turn).id)
    [failed] = runs(world, chat)
    assert failed["status"] == "failed" and failed["error"] == code
    assert CANARY not in json.dumps(failed)


def test_a_step_past_its_deadline_fails_with_timeout(
    world: World, fake_openai: FakeOpenAI, settings: Any
) -> None:
    chat, turn = learned_turn(world, fake_openai)
    settings.OPENBOT_LEARNING_STEP_SECONDS = 0.5
    fake_openai.reply(content="{}", delay=2)
    learning_run_process(run_id=run_of(turn).id)
    [failed] = runs(world, chat)
    assert failed["error"] == "timeout"


def test_learning_off_ends_the_run_with_its_code(world: World, fake_openai: FakeOpenAI) -> None:
    chat, turn = learned_turn(world, fake_openai)
    Organization.objects.filter(pk=world.org.pk).update(bot_memory=False)
    learning_run_process(run_id=run_of(turn).id)
    [ended] = runs(world, chat)
    assert ended["status"] == "done" and ended["error"] == "learning_off"


def test_the_turn_response_names_its_learning_run(world: World, fake_openai: FakeOpenAI) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    response = world.alice.client().post(
        f"/v1/chats/{chat.id}/turns", {"text": "Remember the heron."}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["turn"]["learningRun"] == str(LearningRun.objects.get().pk)
    test_chat = ChatFactory.create(
        owner=world.alice, bot=world.bot, test=True
    )  # [W8] no confide, no run
    response = world.alice.client().post(
        f"/v1/chats/{test_chat.id}/turns", {"text": "Hello."}, format="json"
    )
    assert response.json()["turn"]["learningRun"] is None


def test_only_the_chats_owner_reads_its_runs(world: World, anon: Any) -> None:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    url = f"/v1/chats/{chat.id}/learning"
    assert anon.get(url).status_code == 401
    assert world.alice.client().get(url).status_code == 200
    assert world.carol.client().get(url).status_code == 404  # a participant, not its owner [C5]
    assert world.bob.client().get(url).status_code == 404
    assert world.dave.client().get(url).status_code == 404
