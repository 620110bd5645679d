"""[W2, W3, W4, X2] Dramatiq delivers at least once: the same run delivered again — after it
finished, while a worker holds it, or several times at once through a worker — learns once,
calls (and bills) its step once; two runs of one chat racing apply each item once."""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from pytest_django.fixtures import Settings

from chats.models import Chat, Item
from memory.lock import pool_write
from memory.models import Entry, Evidence
from memorybot.learning import MAX_CLAIMS, _release, learning_run_process, runs_due
from memorybot.models import LearningRun, ModelCall
from memorybot.recovery import recover_learning
from memorybot.tasks import learn
from tests.conftest import World
from tests.factories import ChatFactory
from tests.fakes.openai_server import FakeOpenAI, FakeReply
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    flush_broker,
    learned,
    learning_answer,
    learning_requests,
    learning_worker,
    memory_bot_on,
    observation_change,
    person_item,
    postgresql_only,
    run_of,
    stub_broker,
    waiting_for_advisory_locks,
)


def step_calls(run: LearningRun) -> list[ModelCall]:
    return list(ModelCall.objects.filter(step_key=f"learning:{run.id}:changes"))


def in_thread(work: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    """Run `work` on its own database connection; keep what it raised."""

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_a_run_delivered_three_times_learns_once(world: World, fake_openai: FakeOpenAI) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I speak Portuguese.")
    run = run_of(turn)
    learning_answer(fake_openai, [fact_change("alice speaks portuguese", person_item(turn))])

    for _ in range(3):
        learn.fn(run.id)

    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(chat)] == ["alice speaks portuguese"]
    assert len(learning_requests(fake_openai)) == 1
    assert [(call.attempt, call.billed) for call in step_calls(run)] == [(1, True)]
    # [X2] The message carries the run id only.
    message = learn.message(run.id)
    assert message.args == (run.id,) and message.kwargs == {}


@pytest.mark.django_db(transaction=True)
def test_a_delivery_while_a_worker_holds_the_run_does_nothing(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The first worker holds the run (its lease) while the model answers; deliveries in that
    time neither call the model nor apply anything."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I speak Portuguese.")
    run = run_of(turn)
    asked = len(fake_openai.requests)
    learning_answer(
        fake_openai, [fact_change("alice speaks portuguese", person_item(turn))], delay=1.0
    )
    errors: list[BaseException] = []

    first = in_thread(lambda: learn.fn(run.id), errors)
    assert fake_openai.wait_for_requests(asked + 1)
    run.refresh_from_db()
    assert run.status == LearningRun.Status.RUNNING and run.leased_until is not None
    learn.fn(run.id)
    learning_run_process(run_id=run.id)
    first.join(timeout=30)

    assert errors == []
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE and run.leased_until is None
    assert [entry.content for entry in learned(chat)] == ["alice speaks portuguese"]
    assert len(learning_requests(fake_openai)) == 1
    assert [(call.attempt, call.billed) for call in step_calls(run)] == [(1, True)]


@pytest.mark.django_db(transaction=True)
def test_a_run_sent_three_times_through_a_worker_learns_once(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The turn's end sends the run once [W2]; three more sends of the same id reach a worker
    with several threads (plus its own recovery pass on boot)."""
    flush_broker()
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I speak Portuguese.")
    run = run_of(turn)
    broker = stub_broker()
    assert broker.queues["learning"].qsize() == 1  # sent when the turn's transaction committed
    learning_answer(fake_openai, [fact_change("alice speaks portuguese", person_item(turn))])

    for _ in range(3):
        learn.send(run.id)
    with learning_worker(threads=3):
        pass

    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(chat)] == ["alice speaks portuguese"]
    assert len(learning_requests(fake_openai)) == 1
    assert [(call.attempt, call.billed) for call in step_calls(run)] == [(1, True)]
    assert broker.dead_letters == []


def answer_every_item(fake: FakeOpenAI, chat: Chat, upto: int) -> None:
    """Whatever it is asked, the model proposes a fact from each item i-1 … i-<upto> of
    `chat` (the bot's items among them are refused)."""
    changes: list[Any] = [
        {**fact_change(f"said at i-{seq}"), "sources": [{"chat": chat.id, "item": f"i-{seq}"}]}
        for seq in range(1, upto + 1)
    ]
    fake.default = FakeReply(content=json.dumps({"changes": changes}))


def assert_each_person_item_learned_once(chat: Chat) -> None:
    people = Item.objects.filter(chat=chat, kind=Item.Kind.PERSON).values_list("seq", flat=True)
    assert sorted(entry.content for entry in learned(chat)) == sorted(
        f"said at i-{seq}" for seq in people
    )
    evidence = [
        seq
        for seq in Evidence.objects.filter(chat_id=chat.id).values_list("item_seq", flat=True)
        if seq is not None
    ]
    assert sorted(evidence) == sorted(people)
    assert Chat.objects.get(id=chat.id).read_position == Chat.objects.get(id=chat.id).last_seq


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_runs_of_one_chat_racing_apply_each_item_once(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[W4] Two confided turns; their runs are processed at the same moment, twice each."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    answer_every_item(fake_openai, chat, upto=4)
    runs = [run_of(confided_turn(chat, world.alice, text)) for text in ("I bake.", "I bake bread.")]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def process(run_id: int) -> Callable[[], None]:
        def work() -> None:
            start.wait(timeout=10)
            learning_run_process(run_id=run_id)

        return work

    threads = [in_thread(process(run.id), errors) for run in runs + runs]
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert {run.status for run in LearningRun.objects.all()} == {LearningRun.Status.DONE}
    assert_each_person_item_learned_once(chat)
    assert len(learning_requests(fake_openai)) == 2  # one step per run, never repeated
    assert Entry.objects.count() == 2


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_turns_at_once_over_http_then_racing_runs(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """Two turns of one chat at the same moment through HTTP: both answered (no
    IntegrityError reaches a person); their runs race in a worker, each sent three times."""
    flush_broker()
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    answer_every_item(fake_openai, chat, upto=4)
    errors: list[BaseException] = []
    statuses: list[int] = []
    start = threading.Barrier(2)

    def take_turn(text: str) -> Callable[[], None]:
        def work() -> None:
            client = world.alice.client()
            start.wait(timeout=10)
            response = client.post(f"/v1/chats/{chat.id}/turns", {"text": text}, format="json")
            statuses.append(response.status_code)

        return work

    for thread in [in_thread(take_turn(text), errors) for text in ("I bake.", "I knit.")]:
        thread.join(timeout=30)
    assert errors == [] and statuses == [201, 201]
    runs = list(LearningRun.objects.filter(chat=chat))
    assert len(runs) == 2

    for run in runs:
        for _ in range(2):
            learn.send(run.id)
    with learning_worker(threads=4):
        pass

    assert {run.status for run in LearningRun.objects.all()} == {LearningRun.Status.DONE}
    assert_each_person_item_learned_once(chat)
    assert stub_broker().dead_letters == []


@dataclass
class Busy:
    """A confided turn whose run's lease lasts one second, and a learned fact to build on."""

    chat: Chat
    run: LearningRun
    swims: Entry


@pytest.fixture
def busy(world: World, fake_openai: FakeOpenAI, settings: Settings) -> Busy:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first = confided_turn(chat, world.alice, "I swim.")
    learning_answer(fake_openai, [fact_change("alice swims", person_item(first))])
    learning_run_process(run_id=run_of(first).id)
    (swims,) = learned(chat)
    turn = confided_turn(chat, world.alice, "Every morning.")
    settings.OPENBOT_LEARNING_STEP_SECONDS = 1
    settings.OPENBOT_LEARNING_LEASE_MARGIN_SECONDS = 0
    return Busy(chat=chat, run=run_of(turn), swims=swims)


def answer_with_an_observation(fake: FakeOpenAI, busy: Busy, delay: float = 0.0) -> None:
    learning_answer(
        fake,
        [
            fact_change("alice swims every morning", person_item(busy.run.turn)),
            observation_change("alice is an early riser", busy.swims.id),
            {"kind": "topics", "id": "mem_unknown", "add": ["sport"]},
        ],
        delay=delay,
    )


def assert_applied_once(busy: Busy) -> None:
    run = LearningRun.objects.get(id=busy.run.id)
    assert run.status == LearningRun.Status.DONE
    assert run.refusals == [{"change": 2, "reason": "source_not_visible"}]
    assert Entry.objects.filter(layer=Entry.Layer.OBSERVATION).count() == 1
    assert sorted(entry.content for entry in learned(busy.chat)) == [
        "alice is an early riser",
        "alice swims",
        "alice swims every morning",
    ]
    assert [(call.attempt, call.billed) for call in step_calls(run)] == [(1, True)]


def take_over_when_the_lease_ran_out(run: LearningRun, errors: list[BaseException]) -> Any:
    """A second delivery, once the first worker's lease has run out (recovery's case)."""
    leased_until = LearningRun.objects.get(id=run.id).leased_until
    assert leased_until is not None
    wait_until(lambda: timezone.now() > leased_until)
    return in_thread(lambda: learning_run_process(run_id=run.id), errors)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_lease_that_ran_out_before_the_step_is_taken_over_and_the_step_runs_once(
    world: World, fake_openai: FakeOpenAI, busy: Busy
) -> None:
    """The first worker waits to read the pool (a long change holds it) until its lease runs
    out; a second worker claims the run. Only the holder of the newest lease calls the model."""
    answer_with_an_observation(fake_openai, busy)
    errors: list[BaseException] = []

    with pool_write(world.bot.id):  # a long change of the pool
        first = in_thread(lambda: learning_run_process(run_id=busy.run.id), errors)
        wait_until(lambda: waiting_for_advisory_locks() == 1)
        second = take_over_when_the_lease_ran_out(busy.run, errors)
        wait_until(lambda: waiting_for_advisory_locks() == 2)
    for thread in (first, second):
        thread.join(timeout=30)

    assert errors == []
    assert_applied_once(busy)
    assert len(learning_requests(fake_openai)) == 2  # the first run's and this one's, once


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_lease_that_ran_out_during_the_apply_reuses_the_step_and_applies_once(
    world: World, fake_openai: FakeOpenAI, busy: Busy
) -> None:
    """The first worker has its answer [W3] but waits for the write lock until its lease runs
    out; a second worker claims the run, reuses the recorded answer (no second call) and
    waits too. Exactly one of them applies; the other changes nothing."""
    asked = len(fake_openai.requests)
    answer_with_an_observation(fake_openai, busy, delay=0.3)
    errors: list[BaseException] = []

    first = in_thread(lambda: learning_run_process(run_id=busy.run.id), errors)
    assert fake_openai.wait_for_requests(asked + 1)
    with pool_write(world.bot.id):  # taken while the model answers
        wait_until(lambda: waiting_for_advisory_locks() == 1)
        assert ModelCall.objects.filter(step_key__startswith=f"learning:{busy.run.id}:").exists()
        second = take_over_when_the_lease_ran_out(busy.run, errors)
        wait_until(lambda: waiting_for_advisory_locks() == 2)
    for thread in (first, second):
        thread.join(timeout=30)

    assert errors == []
    assert_applied_once(busy)
    assert len(learning_requests(fake_openai)) == 2


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_run_whose_workers_keep_dying_is_given_up_safely(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[W2, B6] Each claim counts; a run whose workers died MAX_CLAIMS times (left running
    with a lease that ran out) is ended by the recovery pass with a safe error instead of
    being sent again forever, and its read position stays for a later confide."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I collect stamps.")
    run = run_of(turn)
    expired = timezone.now() - timedelta(seconds=1)
    # The state dead workers leave: running, the lease run out, one claim short of the cap.
    LearningRun.objects.filter(id=run.id).update(
        status=LearningRun.Status.RUNNING, leased_until=expired, claims=MAX_CLAIMS - 1
    )
    assert run.id in runs_due()
    learning_answer(fake_openai, [fact_change("alice collects stamps", person_item(turn))])
    learning_run_process(run_id=run.id)  # the last claim still learns
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE

    turn = confided_turn(chat, world.alice, "I collect coins too.")
    run = run_of(turn)
    LearningRun.objects.filter(id=run.id).update(
        status=LearningRun.Status.RUNNING, leased_until=expired, claims=MAX_CLAIMS
    )
    asked = len(fake_openai.requests)
    assert recover_learning() == 0
    learning_run_process(run_id=run.id)
    run.refresh_from_db()
    assert run.status == LearningRun.Status.FAILED
    assert run.error == LearningRun.Error.GAVE_UP
    assert len(fake_openai.requests) == asked
    assert Chat.objects.get(id=chat.id).read_position < (run.turn.end_seq or 0)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_run_given_back_through_a_database_error_is_given_back_on_a_new_connection(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[F7] A delivery that failed gives its run back; when that write fails too (here a lock
    timeout while another transaction holds the run's row; a database restarting alike), it
    is tried again on a new connection, and the next delivery takes the run at once instead of
    after its lease (two minutes)."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    run = run_of(confided_turn(chat, world.alice, "I swim every day."))
    lease = timezone.now() + timedelta(minutes=2)
    LearningRun.objects.filter(id=run.id).update(
        status=LearningRun.Status.RUNNING, leased_until=lease
    )
    run.refresh_from_db()
    held, errors = threading.Event(), list[BaseException]()

    def hold_the_row() -> None:
        with transaction.atomic():
            LearningRun.objects.select_for_update().get(id=run.id)
            held.set()
            time.sleep(1.5)

    holder = in_thread(hold_the_row, errors)
    assert held.wait(10)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '100ms'")  # this connection's first try fails
    _release(run)
    holder.join(10)

    assert errors == []
    assert LearningRun.objects.get(id=run.id).leased_until is None
    learning_answer(fake_openai, [fact_change("alice swims", person_item(run.turn))])
    learning_run_process(run_id=run.id)  # the next delivery takes it now
    assert LearningRun.objects.get(id=run.id).status == LearningRun.Status.DONE
