"""[G2] The in-process worker and its recovery pass start with the serving process, in every
mode: `runserver --noreload`, `runserver` with its autoreloader (in the child that serves,
not in the parent that watches files) and gunicorn. A run left waiting in the database by a
killed server is learned once the server is up, with no new request. Management commands
that do not serve (`migrate`, `check`, `shell`) start no worker.

Each server is a real process on the dev settings (the embedded default: SQLite in a file of
this test's own, no broker) with the fake model server as the memory bot's model.
"""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from bench.load import free_port, session_start
from tests.fakes.openai_server import FakeOpenAI, FakeReply
from tests.memorybot.conftest import PRICE

ROOT = Path(__file__).resolve().parents[2]
STARTED = "learning worker started in process"
# A run's lease is one step plus the margin; recovery re-sends a lost message after it.
STEP_SECONDS, MARGIN_SECONDS, RECOVERY_SECONDS = 4, 1, 0.5


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file database of the dev settings, migrated by `manage.py migrate` (once: a copy per
    test)."""
    database = tmp_path_factory.mktemp("migrated") / "db.sqlite3"
    manage(environment(database), "migrate", "--noinput")
    return database


@dataclass
class Site:
    env: dict[str, str]
    database: Path
    log: Path

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return manage(self.env, *args)

    def waiting_run(self) -> dict[str, Any]:
        """A confided turn taken in `manage.py shell`: its run waits in the database."""
        done = self.manage("shell", "-c", "from tests.memorybot.waiting_run import main; main()")
        scene: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return scene

    def run_row(self, run_id: int) -> tuple[Any, ...]:
        with closing(sqlite3.connect(self.database)) as db:
            row: tuple[Any, ...] = db.execute(
                "SELECT status, error, claims, sent_at FROM memorybot_learningrun WHERE id = ?",
                [run_id],
            ).fetchone()
        return row

    def entries(self) -> int:
        with closing(sqlite3.connect(self.database)) as db:
            (count,) = db.execute("SELECT count(*) FROM memory_entry").fetchone()
        return int(count)


def environment(database: Path, fake: FakeOpenAI | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENBOT_BROKER_URL", "OPENBOT_INPROCESS_WORKER")
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "settings.dev",
            "DATABASE_URL": f"sqlite:///{database}",
            "OPENBOT_SLOT_DIR": str(database.parent / "slots"),
            "OPENBOT_MODEL_PRICES": PRICE,
            "OPENBOT_LEARNING_STEP_SECONDS": str(STEP_SECONDS),
            "OPENBOT_LEARNING_LEASE_MARGIN_SECONDS": str(MARGIN_SECONDS),
            "OPENBOT_RECOVERY_SECONDS": str(RECOVERY_SECONDS),
        }
    )
    if fake is not None:
        env.update({"OPENBOT_OPENAI_BASE_URL": fake.base_url, "OPENBOT_OPENAI_API_KEY": "key"})
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.fixture
def site(migrated: Path, tmp_path: Path, fake_openai: FakeOpenAI) -> Site:
    database = tmp_path / "db.sqlite3"
    shutil.copyfile(migrated, database)
    return Site(env=environment(database, fake_openai), database=database, log=tmp_path / "log")


def test_commands_that_do_not_serve_start_no_worker(site: Site) -> None:
    scene = site.waiting_run()
    assert (scene["status"], scene["workerStarted"]) == ("waiting", False)  # the shell
    left = site.run_row(scene["run"])

    for command in (["migrate", "--noinput"], ["check"]):
        done = site.manage(*command)
        assert STARTED not in done.stdout + done.stderr

    assert site.run_row(scene["run"]) == left
    assert left[:3] == ("waiting", "", 0)


def command(server: str, port: int) -> list[str]:
    address = f"127.0.0.1:{port}"
    if server == "gunicorn":
        return [
            *(sys.executable, "-m", "gunicorn", "settings.wsgi:application", "-b", address),
            "--no-control-socket",  # gunicorn's default socket is one per user, in $HOME
        ]
    reloader = ["--noreload"] if server == "runserver --noreload" else []
    return [sys.executable, "manage.py", "runserver", *reloader, address]


@contextmanager
def serving(server: str, site: Site) -> Iterator[subprocess.Popen[bytes]]:
    """The server, in a session of its own so that stopping it reaches every process."""
    process = session_start(command(server, free_port()), site.env, site.log)
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


SERVERS = [
    "runserver --noreload",
    "runserver",
    pytest.param(
        "gunicorn",
        marks=pytest.mark.skipif(find_spec("gunicorn") is None, reason="needs gunicorn"),
    ),
]


@pytest.mark.parametrize("server", SERVERS)
def test_the_server_learns_a_waiting_run_with_no_new_request(
    server: str, site: Site, fake_openai: FakeOpenAI
) -> None:
    scene = site.waiting_run()
    asked = len(fake_openai.requests)
    fake_openai.default = FakeReply(
        content=json.dumps(
            {
                "changes": [
                    {
                        "kind": "add",
                        "layer": "fact",
                        "content": "alice swims every day",
                        "sources": [{"chat": scene["chat"], "item": scene["item"]}],
                        "topics": [],
                    }
                ]
            }
        )
    )

    with serving(server, site):
        deadline = time.monotonic() + 90
        while site.run_row(scene["run"])[0] != "done":
            assert time.monotonic() < deadline, site.log.read_text(errors="replace")[-4000:]
            time.sleep(0.2)

    assert site.run_row(scene["run"])[:2] == ("done", "")
    assert site.entries() == 1
    assert len(fake_openai.requests) == asked + 1  # the learning step, and nothing else
    # One worker, in the process that serves: never in the autoreloader's parent.
    assert site.log.read_text(errors="replace").count(STARTED) == 1
