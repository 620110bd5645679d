"""[G1] The embedded default holds concurrent use.

People take turns in a group chat over HTTP while a real Dramatiq worker applies learning,
each on its own database connection. On SQLite (a file database with the settings' options,
as `manage.py runserver` uses it) no writer meets "database is locked": every turn answers
201 and every run ends done. And a delivery that meets a database busy past its timeout
gives its run back at once, rather than leaving it "running" until its lease runs out."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError, connection

from chats.models import Chat
from memorybot.learning import learning_run_process, runs_due
from memorybot.models import LearningRun
from tests.busy_database import WriteLock, short_busy_timeout
from tests.conftest import Actor, World
from tests.factories import ChatFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    flush_broker,
    learned,
    learning_answer,
    learning_worker,
    memory_bot_on,
    person_item,
    run_of,
)
from tests.memorybot.test_learning_redelivery import answer_every_item, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 12  # per person; the race failed every run before [G1] at this size


def test_turns_in_a_group_chat_while_the_worker_applies_learning(
    world: World, fake_openai: FakeOpenAI
) -> None:
    flush_broker()
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    # Every learning step proposes a fact from each person item: each apply writes.
    answer_every_item(fake_openai, chat, upto=4 * TURNS)
    errors: list[BaseException] = []
    statuses: list[int] = []
    start = threading.Barrier(2)

    def talk(actor: Actor) -> Callable[[], None]:
        def work() -> None:
            client = actor.client()
            start.wait(timeout=10)
            for number in range(TURNS):
                response = client.post(
                    f"/v1/chats/{chat.id}/turns", {"text": f"I say {number}."}, format="json"
                )
                statuses.append(response.status_code)

        return work

    with learning_worker(threads=2):
        threads = [in_thread(talk(actor), errors) for actor in (world.alice, world.carol)]
        for thread in threads:
            thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)

    assert errors == []
    assert statuses == [201] * (2 * TURNS)
    runs = LearningRun.objects.filter(chat=chat)
    assert runs.count() == 2 * TURNS
    assert {(run.status, run.error) for run in runs} == {(LearningRun.Status.DONE, "")}
    refreshed = Chat.objects.get(id=chat.id)
    assert refreshed.read_position == refreshed.last_seq


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's busy timeout")
def test_a_delivery_that_meets_a_busy_database_gives_its_run_back(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I swim every day.")
    run = run_of(turn)
    swims = [fact_change("alice swims", person_item(turn))]
    asked = len(fake_openai.requests)
    learning_answer(fake_openai, swims, delay=1.0)
    locks: list[WriteLock] = []

    def lock_while_the_model_answers() -> None:
        assert fake_openai.wait_for_requests(asked + 1)
        locks.append(WriteLock())  # a long writer, until this delivery gives up on it

    def end_the_long_writer_once_busy(execute: Any, *args: Any) -> Any:
        try:
            return execute(*args)
        except OperationalError:
            locks[0].release()
            raise

    locker = threading.Thread(target=lock_while_the_model_answers)
    with short_busy_timeout(), connection.execute_wrapper(end_the_long_writer_once_busy):
        locker.start()
        with pytest.raises(OperationalError, match="database is locked"):
            learning_run_process(run_id=run.id)
    locker.join(timeout=10)

    given_back = LearningRun.objects.get(id=run.id)
    assert (given_back.status, given_back.leased_until) == (LearningRun.Status.RUNNING, None)
    assert runs_due() == [run.id]  # the recovery pass sends it now, not after the lease
    learning_answer(fake_openai, swims)
    learning_run_process(run_id=run.id)  # the next delivery (Dramatiq's retry)
    assert LearningRun.objects.get(id=run.id).status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(chat)] == ["alice swims"]
