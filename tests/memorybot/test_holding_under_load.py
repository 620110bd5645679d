"""[G1] The embedded default holds concurrent use.

People take turns in a group chat over HTTP while a real Dramatiq worker applies learning,
each on its own database connection. On SQLite (a file database with the settings' options,
as `manage.py runserver` uses it) no writer meets "database is locked": every turn answers
201 and every run ends done."""

import threading
from collections.abc import Callable

import pytest

from chats.models import Chat
from memorybot.models import LearningRun
from tests.conftest import Actor, World
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import chat_of, flush_broker, learning_worker, memory_bot_on
from tests.memorybot.test_learning_redelivery import answer_every_item, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 12  # per person; the race failed every run before [G1] at this size


def test_turns_in_a_group_chat_while_the_worker_applies_learning(
    world: World, fake_openai: FakeOpenAI
) -> None:
    flush_broker()
    memory_bot_on(world)
    chat = chat_of(world.alice, world.bot, channel=world.channel)
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
