"""[F6, G3] Production serving holds through faults: `scripts/serve_prod.sh` itself (nginx,
gunicorn, `rundramatiq`) on this test's PostgreSQL database and a Redis database of this
module's own, with the memory bot's model on a fake server that takes a second per step.

- A dramatiq worker process killed with SIGKILL takes its `rundramatiq` down; the script
  starts it again, the web answers throughout, and every learning run ends.
- Slow clients (a body announced, a few bytes sent) cannot hold gunicorn's threads: nginx
  reads whole requests first, so a normal request still answers.

With PROXY=none in the environment the script serves with gunicorn alone: the slowloris test
then fails (a normal request waits for a thread that never comes free).
"""

import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings
from pytest_django.fixtures import Settings
from pytest_django.plugin import DjangoDbBlocker

from bench.load import Served, processes, serving
from memorybot.models import LearningRun
from tests.conftest import World
from tests.factories import ChatFactory
from tests.fakes.openai_server import FakeOpenAI, FakeOpenAIServer, FakeReply
from tests.memorybot.conftest import PRICE
from tests.memorybot.learning_world import (
    confided_turn,
    memory_bot_on,
    postgresql_only,
    run_of,
    worker_environment,
)

ROOT = Path(__file__).resolve().parents[1]
REDIS_URL = "redis://127.0.0.1:6379/13"  # a database of its own, flushed around the module
STEP_SECONDS = 3  # a lease is one step plus the margin: 4 s
MODEL_SECONDS = 1.0  # each learning step waits this long for the fake model
RUNS = 8  # as many as the workers have threads (2 processes x 4)
T = TypeVar("T")
ENDED = (LearningRun.Status.DONE, LearningRun.Status.FAILED)


def redis_flush() -> bool:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).flushdb()
    except (redis.RedisError, OSError):
        return False
    return True


pytestmark = [
    pytest.mark.faults,
    postgresql_only,
    pytest.mark.skipif(not redis_flush(), reason="needs Redis on 127.0.0.1"),
    pytest.mark.skipif(
        os.environ.get("PROXY") != "none"
        and not shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin"),
        reason="needs nginx (apt-get install nginx)",
    ),
    pytest.mark.django_db(transaction=True),
]


@dataclass
class Site:
    """The served stack: its URL, its script's process (a session of its own), its log, and
    the fake model its workers call."""

    base_url: str
    session: int
    log: Path
    model: FakeOpenAI

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    @property
    def model_port(self) -> int:
        port = httpx.URL(self.model.base_url).port
        assert port is not None
        return port

    def wait_until(self, condition: Callable[[], T], what: str, timeout: float) -> T:
        """The first true value of `condition()`."""
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            assert time.monotonic() < deadline, f"timed out waiting until {what}\n{self.output()}"
            time.sleep(0.1)
        return value

    def dramatiq_workers(self) -> list[int]:
        """The worker processes of the running `rundramatiq` (children of its main process,
        which a supervising shell of the script started)."""
        mine = [(pid, parent) for pid, parent, session in processes() if session == self.session]
        dramatiq = {pid for pid, _ in mine if "bin/dramatiq" in command(pid)}
        return sorted(pid for pid, parent in mine if parent in dramatiq)


def talks_to(pid: int, port: int) -> bool:
    """Whether process `pid` has a TCP connection open to `port` on this machine."""
    try:
        sockets = {os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in table:
        fields = line.split()  # sl, local, remote, state, …, inode (the 10th)
        if int(fields[2].split(":")[1], 16) == port and f"socket:[{fields[9]}]" in sockets:
            return True
    return False


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture(scope="module")
def site(
    django_db_setup: None,
    django_db_blocker: DjangoDbBlocker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Site]:
    """`scripts/serve_prod.sh` on a free port, ready to answer; stopped (SIGTERM, as Ctrl-C
    would) at the end of the module."""
    with django_db_blocker.unblock():
        migrations_record()
    model = FakeOpenAIServer()
    fake = model.start()
    # Only the workers call this model: every call is a learning step.
    fake.default = FakeReply(content=json.dumps({"changes": []}), delay=MODEL_SECONDS)
    directory = tmp_path_factory.mktemp("served")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **worker_environment(broker_url=REDIS_URL, model_url=fake.base_url),
        "PY": sys.executable,
        "PORT": str(port),
        "WEB": "1",  # one app to load fewer: 16 slow clients are four times its threads
        "SECRET_KEY": f"serve-prod-test-{os.urandom(32).hex()}",
        "OPENBOT_SLOT_DIR": str(directory / "slots"),
        "OPENBOT_LEARNING_STEP_SECONDS": str(STEP_SECONDS),
        "OPENBOT_LEARNING_LEASE_MARGIN_SECONDS": "1",
        "OPENBOT_RECOVERY_SECONDS": "0.5",
    }
    log = directory / "serve_prod.log"
    with ExitStack() as stack:
        stack.callback(redis_flush)
        stack.callback(model.stop)
        process = stack.enter_context(
            serving(
                Served(env=env, command=[str(ROOT / "scripts/serve_prod.sh")], description=""), log
            )
        )
        site = Site(base_url=f"http://127.0.0.1:{port}", session=process.pid, log=log, model=fake)
        site.wait_until(
            lambda: answers(f"{site.base_url}/v1/docs") or process.poll() is not None,
            "the web answers",
            120,
        )
        assert process.poll() is None, f"serve_prod.sh stopped:\n{site.output()}"
        yield site


def migrations_record() -> None:
    """Record every migration as applied: the test database was built from the models
    (`--no-migrations`), and the script migrates before it serves."""
    recorder = MigrationRecorder(connection)
    applied = recorder.applied_migrations()
    with override_settings(MIGRATION_MODULES={}):  # pytest-django's --no-migrations hides them
        migrations = MigrationLoader(None).disk_migrations
    for key in migrations:
        if key not in applied:
            recorder.record_applied(*key)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


class WebWatch:
    """A client reading `GET memory` over and over in a thread, each request with a 5 s
    timeout, until the block ends: what it saw."""

    def __init__(self, site: Site, world: World) -> None:
        self.http = httpx.Client(
            base_url=site.base_url,
            headers={"Authorization": f"Bearer {world.alice.token}"},
            timeout=5,
        )
        self.url = f"/v1/bots/{world.bot.id}/memory"
        self.statuses: list[int] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self.statuses.append(self.http.get(self.url).status_code)
            except httpx.HTTPError as exc:
                self.failures.append(type(exc).__name__)

    def __enter__(self) -> "WebWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.http.close()


def test_learning_goes_on_after_a_dramatiq_worker_process_is_killed(
    world: World, site: Site, settings: Settings, fake_openai: FakeOpenAI
) -> None:
    """[F6] A worker process SIGKILLed in the middle of a learning step (its model call): the
    script starts `rundramatiq` again; the killed process's runs are recovered once their
    lease ends, and every run ends; the web answers every request meanwhile."""
    settings.OPENBOT_MODEL_PRICES = PRICE  # this process's turns confide on `fake_openai`
    memory_bot_on(world)
    runs = [
        run_of(
            confided_turn(
                ChatFactory.create(owner=world.alice, bot=world.bot),
                world.alice,
                f"I swim on day {day}.",
            )
        )
        for day in range(RUNS)
    ]
    ids = [run.id for run in runs]
    unended = LearningRun.objects.filter(id__in=ids).exclude(status__in=ENDED)
    site.wait_until(lambda: len(site.dramatiq_workers()) == 2, "the workers are up", 60)
    before = site.dramatiq_workers()
    # The workers' recovery pass sends the runs; each step waits a second for the model.
    busy = site.wait_until(
        lambda: [pid for pid in before if talks_to(pid, site.model_port)],
        "a worker process is in a model step",
        60,
    )

    with WebWatch(site, world) as web:
        os.kill(busy[0], signal.SIGKILL)
        assert unended.filter(status=LearningRun.Status.RUNNING).exists()
        site.wait_until(lambda: not unended.exists(), "every run has ended", 60)
        site.wait_until(
            lambda: len(set(site.dramatiq_workers()) - set(before)) == 2,
            "rundramatiq runs again",
            60,
        )

    assert "serve_prod: worker stopped (exit" in site.output()
    ended = list(LearningRun.objects.filter(id__in=ids).values_list("status", "claims"))
    print(f"runs (status, claims): {sorted(ended)}; web: {len(web.statuses)} answers")
    # The killed process's runs were claimed again, once their lease had run out.
    assert max(claims for _, claims in ended) >= 2
    assert web.failures == [] and set(web.statuses) == {200}, (web.failures, web.statuses)
    assert len(web.statuses) > 5


SLOW_CLIENTS = 16  # four times gunicorn's threads here (1 worker x 4)


def test_slow_clients_do_not_hold_the_web(world: World, site: Site) -> None:
    """Each slow client announces a 1,000-byte body, sends 6 bytes and waits: nginx holds
    them; a normal request still answers."""
    url = f"/v1/bots/{world.bot.id}/memory"
    auth = f"Authorization: Bearer {world.alice.token}"
    head = (
        f"POST {url} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    address = httpx.URL(site.base_url)
    with ExitStack() as stack:
        for _ in range(SLOW_CLIENTS):
            slow = stack.enter_context(socket.create_connection((address.host, address.port)))
            slow.sendall(head.encode() + b'{"comm')
        time.sleep(1)  # without the proxy, gunicorn hands each to a thread that waits
        started = time.perf_counter()
        try:
            response = httpx.get(
                f"{site.base_url}{url}",
                headers={"Authorization": f"Bearer {world.alice.token}"},
                timeout=5,
            )
        except httpx.TimeoutException:
            pytest.fail(f"GET memory did not answer in 5 s beside {SLOW_CLIENTS} slow clients")
        took = time.perf_counter() - started
    print(f"GET memory beside {SLOW_CLIENTS} slow clients answered in {took * 1000:.0f} ms")
    assert response.status_code == 200


def test_the_proxy_lets_through_what_the_app_answers_itself(world: World, site: Site) -> None:
    """A body as large as the app reads, and a search's longest `q`, reach the app (which
    answers 400 naming what is wrong); one byte more is a 413 in the error shape [§8]."""
    limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    with httpx.Client(
        base_url=site.base_url,
        headers={
            "Authorization": f"Bearer {world.alice.token}",
            "Content-Type": "application/json",
        },
        timeout=10,
    ) as http:
        url = f"/v1/bots/{world.bot.id}/memory"
        largest = http.post(url, content=b" " * limit)
        too_large = http.post(url, content=b" " * (limit + 1))
        search = http.get(f"{url}/search", params={"q": "\U0001d11e" * 1001})

    assert largest.status_code == 400, largest.text
    assert too_large.status_code == 413
    assert too_large.json() == {
        "error": {"code": "too_large", "message": "body: the request body is too large"}
    }
    assert search.status_code == 400 and "q" in search.json()["error"]["fields"], search.text
