"""[B5, B6] At most N memory-bot tasks of a bot at once on one server; the wait for a slot
counts against the deadline. These tests use threads and a second process, so their rows
must be committed: `transaction=True`."""

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from pytest_django.fixtures import Settings

from memorybot.gateway import CallOutcome, model_call
from memorybot.providers import Message, ModelRequest
from memorybot.slots import slot_directory
from tests.conftest import World
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = ModelRequest(messages=(Message.user("hello"),))


def confide(world: World, *, concurrency: int | None, deadline_s: float) -> CallOutcome:
    return model_call(
        organization=world.org,
        bot=world.bot,
        purpose="confide",
        model="openai:gpt-test",
        request=REQUEST,
        deadline_s=deadline_s,
        concurrency=concurrency,
    )


class InThread:
    """Runs a call in its own thread (and database connection), keeping its outcome."""

    def __init__(self, target: Any) -> None:
        self.outcome: CallOutcome | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(target,))
        self.thread.start()

    def _run(self, target: Any) -> None:
        try:
            self.outcome = target()
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def join(self) -> CallOutcome:
        self.thread.join(timeout=30)
        assert self.error is None, self.error
        assert self.outcome is not None
        return self.outcome


def test_a_second_task_waits_for_the_slot_and_gives_up_at_its_deadline(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(delay=2.0)
    slow = InThread(lambda: confide(world, concurrency=1, deadline_s=10.0))
    assert fake_openai.wait_for_requests(1)

    waiting = confide(world, concurrency=1, deadline_s=0.5)

    assert waiting.status == "no_slot" and waiting.result is None
    assert len(fake_openai.requests) == 1, "the waiting task never reached the model"
    assert slow.join().status == "ok"
    assert confide(world, concurrency=1, deadline_s=5.0).status == "ok"


def test_a_waiting_task_gets_the_slot_when_it_frees_in_time(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(delay=0.5)
    first = InThread(lambda: confide(world, concurrency=1, deadline_s=10.0))
    assert fake_openai.wait_for_requests(1)
    second = confide(world, concurrency=1, deadline_s=10.0)
    assert second.status == "ok"
    assert first.join().status == "ok"
    assert fake_openai.peak_in_flight == 1


def test_no_concurrency_limit_lets_tasks_run_together(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(delay=3.0)  # long enough that both are in flight even on a busy machine
    first = InThread(lambda: confide(world, concurrency=None, deadline_s=10.0))
    assert fake_openai.wait_for_requests(1)
    second = confide(world, concurrency=None, deadline_s=10.0)
    assert second.status == "ok"
    assert first.join().status == "ok"
    assert fake_openai.peak_in_flight == 2


def test_a_limit_of_two_runs_two_at_once_and_no_third(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(delay=2.0)
    fake_openai.reply(delay=2.0)
    running = [InThread(lambda: confide(world, concurrency=2, deadline_s=10.0)) for _ in range(2)]
    assert fake_openai.wait_for_requests(2)
    assert confide(world, concurrency=2, deadline_s=0.3).status == "no_slot"
    assert [task.join().status for task in running] == ["ok", "ok"]
    assert fake_openai.peak_in_flight == 2
    assert len(fake_openai.requests) == 2


HOLD_A_SLOT = """
import os, sys, time
import django
django.setup()
from django.test import override_settings
from memorybot.slots import task_slot
with override_settings(OPENBOT_SLOT_DIR=sys.argv[1], OPENBOT_SERVER_ID=sys.argv[2]):
    with task_slot(bot_id=sys.argv[3], concurrency=1, deadline_at=time.monotonic() + 10) as held:
        print("held" if held else "none", flush=True)
        sys.stdin.read()
"""


def hold_slot_in_another_process(server_id: str, bot_id: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLD_A_SLOT,
            str(slot_directory(bot_id).parent.parent),
            server_id,
            bot_id,
        ],
        cwd=Path(django_settings.BASE_DIR),
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "settings.test"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    return process


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=30) == 0


def test_a_slot_held_by_another_process_of_the_server_counts(
    world: World, fake_openai: FakeOpenAI
) -> None:
    process = hold_slot_in_another_process(django_settings.OPENBOT_SERVER_ID, world.bot.id)
    try:
        assert confide(world, concurrency=1, deadline_s=0.3).status == "no_slot"
        assert fake_openai.requests == []
    finally:
        release(process)
    assert confide(world, concurrency=1, deadline_s=5.0).status == "ok"


def test_another_server_has_slots_of_its_own(
    world: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_SERVER_ID = "server-a"
    process = hold_slot_in_another_process("server-b", world.bot.id)
    try:
        assert confide(world, concurrency=1, deadline_s=5.0).status == "ok"
    finally:
        release(process)
    assert slot_directory(world.bot.id).parent.name == "server-a"
