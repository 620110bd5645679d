"""[W2, W3, W4, X2] A learning worker killed with SIGKILL in the middle of a run: a real
`manage.py rundramatiq` process on Redis (or RabbitMQ) and on this test's PostgreSQL database,
talking to the fake model server over HTTP. After the dead worker's lease has run out, a
recovery pass — `manage.py recover_learning`, or the restarted worker's own pass on boot and on
its schedule — hands the run to the new worker; the run finishes, each model step is billed
once, and the entries are those of a run without the crash.

PostgreSQL only (the worker is another process on the same database), and only where the
broker answers on 127.0.0.1 (Redis on 6379, RabbitMQ on 5672).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import pika.exceptions
import pytest
import redis
from django.utils import timezone

from chats.models import Chat, Item
from memory.lock import pool_write
from memory.models import Entry, EntryTag
from memorybot.learning import LOST_AFTER_SECONDS, learning_run_process, runs_due
from memorybot.models import LearningRun, ModelCall
from memorybot.purge import memory_purge
from openbot.models import Bot
from tests.conftest import World
from tests.factories import BotFactory, ChatFactory, GrantFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    flush_broker,
    learning_answer,
    learning_requests,
    memory_bot_on,
    observation_change,
    person_item,
    postgresql_only,
    run_of,
    waiting_for_advisory_locks,
    worker_environment,
)

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/11"
LEARNING_QUEUES = ("learning", "learning.DQ", "learning.XQ")  # what dramatiq declares
STEP_SECONDS = 3  # a lease is one step plus the margin: 4 s
RECOVERY_SECONDS = 0.5


def redis_keys(namespace: str) -> list[bytes]:
    """The keys of a test's broker namespace on Redis: each test has one of its own, so no other
    process that uses this database takes or adds its messages."""
    return list(
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).scan_iter(f"{namespace}:*")
    )


def flush_redis(namespace: str) -> None:
    keys = redis_keys(namespace)
    if keys:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).delete(*keys)


def redis_messages(namespace: str) -> list[dict[str, Any]]:
    """The messages waiting in the learning queue on Redis (dramatiq keeps their bodies in
    the hash `<namespace>:<queue>.msgs`)."""
    bodies = redis.Redis.from_url(REDIS_URL).hvals(f"{namespace}:learning.msgs")
    return [json.loads(body) for body in bodies]


def broker_state(worker: "Worker", runs: list[LearningRun]) -> dict[str, Any]:
    """What a failure of a recovery pass is read against: the runs as the pass sees them and,
    on Redis, every key of the test's namespace with the ids of the messages it holds; on
    RabbitMQ, each learning queue's waiting messages and consumers (None: no such queue)."""
    state: dict[str, Any] = {
        "runs": list(
            LearningRun.objects.filter(id__in=[run.id for run in runs]).values_list(
                "id", "status", "sent_at", "leased_until", "message_key"
            )
        )
    }
    if worker.env["OPENBOT_BROKER_URL"] == REDIS_URL:
        client = redis.Redis.from_url(REDIS_URL)
        state["redis"] = {
            str(key): client.hkeys(key) if client.type(key) == b"hash" else client.type(key)
            for key in redis_keys(worker.namespace)
        }
    else:
        state["rabbitmq"] = rabbitmq_queues(worker.namespace)
    return state


def rabbitmq_url(vhost: str) -> str:
    return f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}"


@contextmanager
def rabbitmq_vhost() -> Iterator[str]:
    """A virtual host of the test's own, RabbitMQ's namespace: no other process on this broker
    (another test run, a worker one left) declares, takes or deletes the test's queues. CI saw
    the learning queues of the default host vanish between two recovery passes."""
    name = f"openbot-test-{os.urandom(8).hex()}"
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield name
    finally:
        rabbitmqctl("delete_vhost", name)


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "--quiet", *args], check=True, capture_output=True, timeout=60)


def rabbitmq_queues(vhost: str) -> dict[str, tuple[int, int] | None]:
    queues: dict[str, tuple[int, int] | None] = {}
    with pika.BlockingConnection(pika.URLParameters(rabbitmq_url(vhost))) as amqp:
        for name in LEARNING_QUEUES:
            channel = amqp.channel()  # a failed passive declare closes its channel
            try:
                declared = channel.queue_declare(queue=name, passive=True).method
            except pika.exceptions.ChannelClosedByBroker:
                queues[name] = None
            else:
                queues[name] = (declared.message_count, declared.consumer_count)
    return queues


def flush_rabbitmq(vhost: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(rabbitmq_url(vhost))) as amqp:
        channel = amqp.channel()
        for name in LEARNING_QUEUES:
            channel.queue_delete(queue=name)


def redis_answers() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def rabbitmq_answers() -> bool:
    try:
        pika.BlockingConnection(pika.URLParameters(rabbitmq_url("/"))).close()
    except (pika.exceptions.AMQPError, OSError):
        return False
    return True


# Asked when the module is collected, which may be while another process's tests use the
# brokers (a restarted xdist worker collects again): so only asked, never flushed.
needs_redis = pytest.mark.skipif(not redis_answers(), reason="needs Redis on 127.0.0.1")
needs_rabbitmq = pytest.mark.skipif(
    not (rabbitmq_answers() and shutil.which("rabbitmqctl")),
    reason="needs RabbitMQ on 127.0.0.1 and rabbitmqctl",
)
BROKERS = [
    pytest.param("redis", id="redis", marks=needs_redis),
    pytest.param("rabbitmq", id="rabbitmq", marks=needs_rabbitmq),
]

# One real Redis and RabbitMQ, whose queues these tests flush: one test at a time in `make test`.
pytestmark = [
    postgresql_only,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("brokers"),
]


class Worker:
    """`manage.py rundramatiq --processes 1 --threads 1` in a session of its own, so that
    SIGKILL reaches the dramatiq main process and its worker process at once."""

    def __init__(
        self, env: dict[str, str], log: Path, namespace: str, flush: Callable[[str], None]
    ) -> None:
        """`namespace`: the test's own on the broker (a Redis key prefix, a RabbitMQ host)."""
        self.env, self.log, self.namespace, self._flush = env, log, namespace, flush
        self.process: subprocess.Popen[bytes] | None = None

    def lose_queue(self) -> None:
        """What a Redis restarted without persistence, or a deleted queue, leaves: nothing."""
        self._flush(self.namespace)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "rundramatiq",
                    "--processes",
                    "1",
                    "--threads",
                    "1",
                    "--worker-shutdown-timeout",
                    "2000",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL: no shutdown, no ack, no cleanup."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self._gone()

    def _gone(self) -> None:
        """Wait until no process of the worker's session is left (its worker process can
        outlive the main one), so that none of them sends to the next test's broker."""
        assert self.process is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._gone()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def recover_learning(self) -> dict[str, Any]:
        """`manage.py recover_learning` in a process of its own, on the same broker."""
        done = subprocess.run(
            [sys.executable, "manage.py", "recover_learning"],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            timeout=60,
            check=True,
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result


@pytest.fixture(params=BROKERS[:1])
def worker(
    request: pytest.FixtureRequest, fake_openai: FakeOpenAI, tmp_path: Path
) -> Iterator[Worker]:
    """A worker on the broker and on this test's database, with short steps, leases and
    recovery (Redis unless a test asks for more brokers), in a namespace of the test's own."""
    flush: Callable[[str], None]
    with ExitStack() as cleanup:
        if request.param == "redis":
            namespace, url, flush = f"openbot-test-{os.urandom(8).hex()}", REDIS_URL, flush_redis
            cleanup.callback(flush_redis, namespace)
            extra = {"OPENBOT_BROKER_NAMESPACE": namespace}
        else:  # a RabbitMQ URL refuses a namespace: the test's host is in the URL
            namespace = cleanup.enter_context(rabbitmq_vhost())
            url, flush, extra = rabbitmq_url(namespace), flush_rabbitmq, {}
        env = {
            **worker_environment(broker_url=url, model_url=fake_openai.base_url),
            "DJANGO_SETTINGS_MODULE": "settings.test",
            "OPENBOT_LEARNING_STEP_SECONDS": str(STEP_SECONDS),
            "OPENBOT_LEARNING_LEASE_MARGIN_SECONDS": "1",
            "OPENBOT_RECOVERY_SECONDS": str(RECOVERY_SECONDS),
            **extra,
        }
        process = Worker(env, tmp_path / "worker.log", namespace, flush)
        cleanup.callback(process.stop)
        yield process


def wait_until(
    condition: Callable[[], bool], worker: Worker, what: str, timeout: float = 40
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}\n{worker.output()}"
        time.sleep(0.1)


def step_calls(run: LearningRun) -> list[tuple[int, str, bool]]:
    return list(
        ModelCall.objects.filter(step_key=f"learning:{run.id}:changes")
        .order_by("attempt")
        .values_list("attempt", "status", "billed")
    )


@dataclass
class Conversation:
    """A fact alice already has (from an earlier chat), and a confided turn of hers in a new
    chat whose run waits for a worker."""

    earlier: Chat
    likes: Entry
    chat: Chat
    run: LearningRun

    def answer(self) -> list[Any]:
        """What the model proposes for the run: a fact, an observation over the earlier fact,
        a topic for it, and a fact from the bot's words (refused)."""
        said = person_item(self.run.turn)
        return [
            fact_change("alice swims before work", said, topics=["sport"]),
            observation_change("alice is an early riser", self.likes.id, confidence=0.6),
            {"kind": "topics", "id": self.likes.id, "add": ["mornings"], "remove": []},
            fact_change("x", said, self.chat.items.get(kind=Item.Kind.BOT)),
        ]

    def memory(self) -> list[tuple[Any, ...]]:
        """The entries of both chats, the chats' ids taken out, so that two conversations
        alike compare equal."""
        rows = []
        chats = [f"chat:{self.chat.id}", f"chat:{self.earlier.id}"]
        for entry in Entry.objects.filter(tag_rows__tag__in=chats).distinct():
            tags = sorted(
                tag.replace(self.chat.id, "<chat>").replace(self.earlier.id, "<earlier>")
                for tag in EntryTag.objects.filter(entry=entry).values_list("tag", flat=True)
            )
            rows.append((entry.layer, entry.content, entry.confidence, entry.status, tags))
        return sorted(rows)


def conversation(world: World, bot: Bot | None = None) -> Conversation:
    bot = bot or world.bot
    earlier = ChatFactory.create(owner=world.alice, bot=bot)
    likes = fact(
        [ItemFactory.create(chat=earlier, person=world.alice.person)], content="alice likes tea"
    )
    chat = ChatFactory.create(owner=world.alice, bot=bot)
    turn = confided_turn(chat, world.alice, "I swim every day before work.")
    return Conversation(earlier=earlier, likes=likes, chat=chat, run=run_of(turn))


@pytest.mark.parametrize("worker", BROKERS, indirect=True)
def test_a_worker_killed_during_the_model_step_is_recovered_and_bills_once(
    world: World, fake_openai: FakeOpenAI, worker: Worker
) -> None:
    flush_broker()
    memory_bot_on(world)
    # The same conversation, learned in this process without a crash, is what to compare with:
    # it is held by a second bot, or [K5] would refuse the crashed run's facts as duplicates.
    twin = BotFactory.create(organization=world.org, name="twin")
    GrantFactory.create(bot=twin, level="write", person=world.alice.person)
    crashed, calm = conversation(world), conversation(world, twin)
    chat, run = crashed.chat, crashed.run
    learning_answer(fake_openai, calm.answer())
    learning_run_process(run_id=calm.run.id)
    assert LearningRun.objects.get(id=calm.run.id).status == LearningRun.Status.DONE
    changes = crashed.answer()
    asked = len(fake_openai.requests)
    learning_answer(fake_openai, changes, delay=60)  # the step the worker is killed in
    learning_answer(fake_openai, changes)  # the same step after the restart

    worker.start()  # its recovery pass on boot sends the run (the turn has ended) [W2]
    assert fake_openai.wait_for_requests(asked + 1, timeout=40), worker.output()
    assert LearningRun.objects.get(id=run.id).status == LearningRun.Status.RUNNING
    worker.kill()

    assert LearningRun.objects.get(id=run.id).status == LearningRun.Status.RUNNING
    assert [row[1] for row in crashed.memory()] == ["alice likes tea"]
    assert step_calls(run) == []
    assert Chat.objects.get(id=chat.id).read_position == 0
    # Nothing is due while the dead worker's lease lasts (asked here, at once: a command's
    # process may take longer than the test's 4-second lease to start); then the run is due
    # again, and the command sends it.
    assert run.id not in runs_due()
    leased_until = LearningRun.objects.get(id=run.id).leased_until
    assert leased_until is not None
    wait_until(lambda: timezone.now() > leased_until, worker, "the lease has run out")
    assert worker.recover_learning() == {"enqueued": 1}
    if worker.env["OPENBOT_BROKER_URL"] == REDIS_URL:
        # [X2] Every message the broker holds names the run and nothing else: the dead
        # worker's unacknowledged one and the one the command just sent.
        messages = redis_messages(worker.namespace)
        assert messages
        for message in messages:
            assert (message["actor_name"], message["args"], message["kwargs"]) == (
                "learn",
                [run.id],
                {},
            )
            assert "swim" not in json.dumps(message)

    finish(worker, run)

    finished = LearningRun.objects.get(id=run.id)
    assert finished.error == "" and finished.leased_until is None
    assert finished.refusals == [{"change": 3, "reason": "bot_words_as_source"}]
    assert len(learning_requests(fake_openai)) == 3  # calm run, killed step, resumed step
    assert step_calls(run) == [(1, "ok", True)]  # the killed call was never billed
    assert ModelCall.objects.filter(step_key__isnull=False, billed=True).count() == 2
    assert crashed.memory() == calm.memory()
    assert [row[:2] for row in crashed.memory()] == [
        ("fact", "alice likes tea"),
        ("fact", "alice swims before work"),
        ("observation", "alice is an early riser"),
    ]
    assert Chat.objects.get(id=chat.id).read_position == run.turn.end_seq


def test_a_worker_killed_before_it_applied_its_answer_reuses_the_recorded_step(
    world: World, fake_openai: FakeOpenAI, worker: Worker
) -> None:
    """[W3] The step completed and was recorded; the worker died waiting for the pool's
    lock. The next worker applies the recorded answer: the model is not called again."""
    flush_broker()
    memory_bot_on(world)
    crashed = conversation(world)
    chat, run = crashed.chat, crashed.run
    learning_answer(fake_openai, crashed.answer(), delay=0.5)

    kill_once_the_step_is_recorded(world, fake_openai, worker, run)
    assert [row[1] for row in crashed.memory()] == ["alice likes tea"]
    assert LearningRun.objects.get(id=run.id).status == LearningRun.Status.RUNNING

    finish(worker, run)

    assert len(learning_requests(fake_openai)) == 1
    assert step_calls(run) == [(1, "ok", True)]
    assert [row[1] for row in crashed.memory()] == [
        "alice likes tea",
        "alice swims before work",
        "alice is an early riser",
    ]
    assert "mornings" in crashed.memory()[0][4]
    assert Chat.objects.get(id=chat.id).read_position == run.turn.end_seq


def test_a_recorded_step_that_a_purge_blanked_is_asked_again(
    world: World, fake_openai: FakeOpenAI, worker: Worker
) -> None:
    """[W3, P4] The step completed and was recorded, and the worker died before it applied
    it. A purge then blanks the recorded answer (its request showed a purged entry): the next
    worker cannot reuse it, so it asks the model again and applies that answer."""
    flush_broker()
    memory_bot_on(world)
    crashed = conversation(world)
    run = crashed.run
    learning_answer(fake_openai, crashed.answer(), delay=0.5)
    said = crashed.chat.items.get(kind=Item.Kind.PERSON)
    learning_answer(fake_openai, [fact_change("alice swims before work", said)])

    kill_once_the_step_is_recorded(world, fake_openai, worker, run)
    assert memory_purge(pool_id=world.bot.id, tag=f"chat:{crashed.earlier.id}") == 1
    assert ModelCall.objects.get(step_key__isnull=False).blanked_at is not None

    finish(worker, run)

    assert len(learning_requests(fake_openai)) == 2
    assert step_calls(run) == [(1, "ok", True), (2, "ok", True)]
    assert [row[1] for row in crashed.memory()] == ["alice swims before work"]


def kill_once_the_step_is_recorded(
    world: World, fake: FakeOpenAI, worker: Worker, run: LearningRun
) -> None:
    """Start the worker; once its step is recorded, hold the pool's write lock (a long change)
    until the worker waits for the pool, and kill it there."""
    asked = len(fake.requests)
    worker.start()
    assert fake.wait_for_requests(asked + 1, timeout=40), worker.output()
    with pool_write(world.bot.id):
        wait_until(lambda: step_calls(run) == [(1, "ok", True)], worker, "the step is recorded")
        wait_until(
            lambda: waiting_for_advisory_locks() == 1, worker, "the worker waits for the lock"
        )
        worker.kill()


def finish(worker: Worker, run: LearningRun) -> None:
    """Start the worker again and wait until the run is done."""
    worker.start()
    wait_until(
        lambda: LearningRun.objects.get(id=run.id).status == LearningRun.Status.DONE,
        worker,
        "the run is done",
    )
    worker.stop()


# --- a lost queue [F7] ---------------------------------------------------------------------


@pytest.mark.faults
@pytest.mark.parametrize("worker", BROKERS, indirect=True)
def test_runs_whose_queue_the_broker_lost_are_sent_again_at_once(
    world: World, fake_openai: FakeOpenAI, worker: Worker
) -> None:
    """[F7] The broker loses its queue (Redis restarted without persistence, a queue deleted):
    the runs it held are sent again by the next recovery pass, not after their lease (two
    minutes here), and a run whose message the broker still holds is not sent twice."""
    worker.env["OPENBOT_LEARNING_STEP_SECONDS"] = "120"
    flush_broker()
    memory_bot_on(world)
    runs = [conversation(world).run for _ in range(3)]
    for _ in runs:
        learning_answer(fake_openai, [])
    # Their messages went to this test's in-process broker: the real one never held them.
    time.sleep(LOST_AFTER_SECONDS)
    assert worker.recover_learning() == {"enqueued": 3}
    time.sleep(LOST_AFTER_SECONDS)
    held = broker_state(worker, runs)
    # A string, which pytest shows whole (a tuple's repr it cuts short).
    assert worker.recover_learning() == {"enqueued": 0}, (
        f"{held}\nafter: {broker_state(worker, runs)}"
    )

    worker.lose_queue()
    time.sleep(LOST_AFTER_SECONDS)
    assert worker.recover_learning() == {"enqueued": 3}
    worker.lose_queue()
    worker.start()  # its recovery pass finds the messages gone

    wait_until(
        lambda: all(
            LearningRun.objects.get(id=run.id).status == LearningRun.Status.DONE for run in runs
        ),
        worker,
        "every run is done",
        timeout=30,
    )
