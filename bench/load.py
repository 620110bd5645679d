"""[G3] Load: concurrent HTTP clients against a served setup, the way API clients use it.

`--clients` (16) clients, each a thread with its own keep-alive `httpx.Client` and its own
person and token, for `--seconds` (120) mix: turns in a private chat (the offline model as the
bot's model confides on every turn, so every turn stores a learning run, and as the memory
bot's model it learns a fact from every person item), Remember, Forget of an entry the client
remembered, `GET memory`, `GET memory/log?since=` (as a poller would), and a purge of
`chat:<id>` of a chat the client created (then it starts a new chat).

The bench starts and stops the servers itself, as subprocesses, with a temporary directory:

- `--setup embedded`: the default setup — `settings.dev`, a SQLite file, the in-process worker —
  served by `manage.py runserver --noreload` (what `make run` serves, without the file watcher).
- `--setup production`: `scripts/serve_prod.sh` (what `make serve-prod` runs) with the
  production settings: nginx in front (`PROXY=none` in the environment: without), gunicorn
  (`--web` workers) and `rundramatiq` (`--workers` processes) on
  PostgreSQL (`--database-url`, the bench's own database: dropped and created at every start)
  and Redis or RabbitMQ (`--broker-url`, a broker of the bench's own: its queues are flushed).

The clients share one bot (one memory pool, so one pool lock [L1]: the hardest case) unless
`--bots` spreads them over several. Organization, people, bots and tokens are written through
the services, as `manage.py bootstrap` does. The server's log is kept in
`<tmp>/openbot-load-<setup>.log`. Afterwards it prints requests/s, p50/p95 per route, the 5xx count,
acknowledged writes lost (a Remember answered 201 that the client's `GET memory` no longer
shows, unless the client itself forgot the entry or its Forget got no answer), and the
learning runs not ended `--settle` (60) seconds after the load stopped. Exit 1 when any of
those three is not 0.

Run `python -m bench.load [--setup embedded|production] [--clients 16] [--seconds 120]
[--bots 1]`.
"""

import argparse
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/openbot_load"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
OFFLINE_MODEL = "offline:extractive"
# Above the turn deadline (OPENBOT_TURN_DEADLINE_SECONDS, 60 s): a turn always answers first.
REQUEST_SECONDS = 90.0
READY_SECONDS = 180.0

# What a client does next, and how often: (action, weight).
MIX = (
    ("turn", 3.0),
    ("remember", 3.0),
    ("forget", 1.0),
    ("memory", 3.0),
    ("log", 2.0),
    ("purge", 0.3),
)
# The status each route answers when all is well.
EXPECTED = {
    "POST chats": 201,
    "POST turns": 201,
    "Remember": 201,
    "Forget": 200,
    "GET memory": 200,
    "GET memory/log": 200,
    "POST purge": 200,
}
WHO = ("I", "My sister", "Our team", "My neighbour", "The landlord")
DID = ("moved to", "visited", "is planning a trip to", "started a course in", "sold a flat in")
WHERE = ("Lisbon", "Oslo", "Kyoto", "Valparaiso", "Tallinn", "Accra", "Hobart", "Cusco")
WHEN = ("last spring", "in March", "next year", "every summer", "after the wedding")
TOPICS = ("travel", "family", "work", "plans", "home")


@dataclass
class Tally:
    """What one client saw; merged after the load (each client writes only its own)."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)  # no answer: route and error type
    remembered: set[str] = field(default_factory=set)  # answered 201
    forgotten: set[str] = field(default_factory=set)  # their Forget answered 200
    unsure: set[str] = field(default_factory=set)  # their Forget got no clear answer

    def merge(self, other: "Tally") -> None:
        for route, samples in other.latencies.items():
            self.latencies.setdefault(route, []).extend(samples)
        self.statuses.update(other.statuses)
        self.failures.update(other.failures)


@dataclass(frozen=True)
class Client:
    person_id: str
    token: str
    bot_id: str  # the bot whose memory it uses


@dataclass(frozen=True)
class Scene:
    organization_id: str
    clients: list[Client]


class Session:
    """One client's loop: its person, its chat, the entries it remembered."""

    def __init__(self, http: httpx.Client, bot_id: str, rng: random.Random) -> None:
        self.http, self.bot_id, self.rng = http, bot_id, rng
        self.tally = Tally()
        self.chat_id: str | None = None
        self.turns_in_chat = 0
        self.version = 0

    def call(self, route: str, method: str, url: str, body: Any = None) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = self.http.request(method, url, json=body)
        except httpx.HTTPError as exc:
            self.tally.failures[f"{route}: {type(exc).__name__}"] += 1
            return None
        self.tally.latencies.setdefault(route, []).append((time.perf_counter() - started) * 1000)
        self.tally.statuses[(route, response.status_code)] += 1
        return response if response.status_code == EXPECTED[route] else None

    def turn(self) -> None:
        if self.chat_id is None:
            created = self.call("POST chats", "POST", "/v1/chats", {"bot": self.bot_id})
            if created is None:
                return
            self.chat_id, self.turns_in_chat = created.json()["id"], 0
        pick = self.rng.choice
        text = f"{pick(WHO)} {pick(DID)} {pick(WHERE)} {pick(WHEN)}."
        if self.call("POST turns", "POST", f"/v1/chats/{self.chat_id}/turns", {"text": text}):
            self.turns_in_chat += 1

    def remember(self) -> None:
        content = f"Remember: {self.rng.choice(WHERE)} code {self.rng.randrange(10**6):06d}"
        command = {"_tag": "Remember", "content": content, "tags": [self.rng.choice(TOPICS)]}
        answered = self.call(
            "Remember", "POST", f"/v1/bots/{self.bot_id}/memory", {"command": command}
        )
        if answered is not None:
            self.tally.remembered.add(answered.json()["id"])

    def forget(self) -> None:
        live = sorted(self.tally.remembered - self.tally.forgotten - self.tally.unsure)
        if not live:
            return self.remember()
        entry_id = self.rng.choice(live)
        command = {"_tag": "Forget", "id": entry_id}
        if self.call("Forget", "POST", f"/v1/bots/{self.bot_id}/memory", {"command": command}):
            self.tally.forgotten.add(entry_id)
        else:
            self.tally.unsure.add(entry_id)

    def memory(self) -> None:
        self.call("GET memory", "GET", f"/v1/bots/{self.bot_id}/memory")

    def log(self) -> None:
        answered = self.call(
            "GET memory/log", "GET", f"/v1/bots/{self.bot_id}/memory/log?since={self.version}"
        )
        if answered is not None:
            self.version = answered.json()["version"]

    def purge(self) -> None:
        if self.chat_id is None or not self.turns_in_chat:
            return self.turn()
        tag = f"chat:{self.chat_id}"
        self.call("POST purge", "POST", f"/v1/bots/{self.bot_id}/memory/purge", {"tag": tag})
        self.chat_id = None

    def warm(self) -> None:
        """Untimed: the client's first chat, one turn and one read, so the figures are not
        those of cold server threads (a first connection, first imports). Any answer but the
        expected one stops the bench."""
        for route, method, url, body in (
            ("POST chats", "POST", "/v1/chats", {"bot": self.bot_id}),
            ("POST turns", "POST", "/v1/chats/{chat}/turns", {"text": "Hello."}),
            ("GET memory", "GET", f"/v1/bots/{self.bot_id}/memory", None),
        ):
            response = self.http.request(method, url.format(chat=self.chat_id), json=body)
            if response.status_code != EXPECTED[route]:
                raise SystemExit(f"warm-up: {route} answered {response.status_code}")
            if route == "POST chats":
                self.chat_id = response.json()["id"]
        self.turns_in_chat = 1

    def run(self, until: float) -> None:
        actions = [getattr(self, name) for name, _ in MIX]
        weights = [weight for _, weight in MIX]
        while time.monotonic() < until:
            self.rng.choices(actions, weights)[0]()


def http_client(base_url: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=REQUEST_SECONDS,
    )


def load(scene: Scene, base_url: str, seconds: float) -> tuple[list[Tally], float]:
    """Every client's loop in a thread for `seconds` once all are warm; the tallies and how
    long the load took (until the last request in flight answered)."""
    sessions = [
        Session(http_client(base_url, client.token), client.bot_id, random.Random(number))
        for number, client in enumerate(scene.clients)
    ]
    window: list[float] = []  # when the timed load starts, set once every client is warm
    warm = threading.Barrier(len(sessions), action=lambda: window.append(time.monotonic()))

    def work(session: Session) -> None:
        try:
            session.warm()
        except BaseException:
            warm.abort()  # the others stop waiting; the load does not start
            raise
        warm.wait()
        session.run(window[0] + seconds)

    threads = [threading.Thread(target=work, args=(session,), daemon=True) for session in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=READY_SECONDS + seconds + REQUEST_SECONDS)
    if not window:
        raise SystemExit("the warm-up failed: see above")
    started = window[0]
    took = time.monotonic() - started
    for session in sessions:
        session.http.close()
    return [session.tally for session in sessions], took


def lost_writes(scene: Scene, base_url: str, tallies: list[Tally]) -> tuple[int, int, int]:
    """Per client, read the whole `GET memory`: (acknowledged Remembers the bench did not
    forget, how many of them it no longer shows as active, forgotten entries still shown)."""
    kept = lost = shown = 0
    for client, tally in zip(scene.clients, tallies, strict=True):
        with http_client(base_url, client.token) as http:
            response = http.get(f"/v1/bots/{client.bot_id}/memory")
        response.raise_for_status()
        entries = response.json()["entries"]
        active = {entry["id"] for entry in entries if entry["status"] == "active"}
        expected = tally.remembered - tally.forgotten - tally.unsure
        kept += len(expected)
        lost += len(expected - active)
        shown += len(tally.forgotten & {entry["id"] for entry in entries})
    return kept, lost, shown


def learning_settle(scene: Scene, settle: float) -> tuple[Counter[str], float | None]:
    """Wait up to `settle` seconds for the bench's learning runs to end: their statuses then
    (with the error of failed ones), and after how many seconds none was left unended."""
    from memorybot.models import LearningRun

    runs = LearningRun.objects.filter(chat__organization_id=scene.organization_id)
    unended = (LearningRun.Status.WAITING, LearningRun.Status.RUNNING)
    started = time.monotonic()
    while True:
        waited = time.monotonic() - started
        if not runs.filter(status__in=unended).exists():
            ended_after: float | None = waited
            break
        if waited >= settle:
            ended_after = None
            break
        time.sleep(1.0)
    statuses: Counter[str] = Counter()
    for status, error in runs.values_list("status", "error"):
        statuses[f"{status} ({error})" if error else status] += 1
    return statuses, ended_after


def provision(clients: int, bots: int) -> Scene:
    """An organization learning with the offline model, `bots` bots, and `clients` people, a
    token each, spread over the bots in turn, each with `write` on its bot (a purge needs it;
    `write` implies `read`)."""
    from openbot import services

    organization = services.organization_create(name="load bench")
    services.organization_settings_update(
        organization=organization, bot_memory=True, bot_memory_model=OFFLINE_MODEL
    )
    pools = [
        services.bot_create(organization=organization, name=f"bot {number}", model=OFFLINE_MODEL)
        for number in range(bots)
    ]
    people = []
    for number in range(clients):
        bot = pools[number % bots]
        person = services.person_create(organization=organization, name=f"client {number}")
        services.grant_set(bot=bot, level="write", person=person)
        token = services.token_create(person=person, organization=organization)
        people.append(Client(person_id=person.id, token=token, bot_id=bot.id))
    return Scene(organization_id=organization.id, clients=people)


def free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass(frozen=True)
class Served:
    """How a setup is served: its environment, its command and a line describing it."""

    env: dict[str, str]
    command: list[str]
    description: str


def served(args: argparse.Namespace, directory: Path, port: int) -> Served:
    from cryptography.fernet import Fernet

    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("OPENBOT_BROKER_URL", "OPENBOT_INPROCESS_WORKER", "SECRET_KEY")
    }
    env |= {
        "OPENBOT_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "OPENBOT_SLOT_DIR": str(directory / "slots"),
        # [T1] The bench's clients call faster than any person: no limits in their way.
        "OPENBOT_THROTTLE_TOKEN": "off",
        "OPENBOT_THROTTLE_WRITES": "off",
        "OPENBOT_THROTTLE_AUTH_FAILURES": "off",
    }
    if args.setup == "embedded":
        env |= {
            "DJANGO_SETTINGS_MODULE": "settings.dev",
            "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        }
        return Served(
            env=env,
            command=[sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            description="embedded: runserver --noreload, settings.dev, SQLite file, "
            "in-process worker",
        )
    env |= {
        "DJANGO_SETTINGS_MODULE": "settings.production",
        "DATABASE_URL": args.database_url,
        "OPENBOT_BROKER_URL": args.broker_url,
        "SECRET_KEY": f"load-bench-{random.SystemRandom().getrandbits(256):x}",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
        "PORT": str(port),
        "WEB": str(args.web),
        "WEB_THREADS": str(args.web_threads),
        "WORKERS": str(args.workers),
        "WORKER_THREADS": str(args.worker_threads),
        "PY": sys.executable,
    }
    proxy = "gunicorn alone" if env.get("PROXY") == "none" else "nginx in front"
    return Served(
        env=env,
        command=[str(ROOT / "scripts" / "serve_prod.sh")],
        description=f"production: scripts/serve_prod.sh — {proxy}, gunicorn {args.web} workers × "
        f"{args.web_threads} threads, rundramatiq {args.workers} processes × "
        f"{args.worker_threads} threads, settings.production, PostgreSQL, "
        f"{args.broker_url.split('://')[0]} broker",
    )


def session_start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A server process in a session of its own, so that stopping it can reach every process
    it starts; its output goes to the end of `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@contextmanager
def serving(setup: Served, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The server, stopped with SIGTERM (the script stops what it started), and every
    process of its session killed if that takes too long."""
    process = session_start(setup.command, setup.env, log)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            session_kill(process.pid)
            process.wait(timeout=10)


def processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent's pid, session) of every process on this machine."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After pid and (comm): state, ppid, pgrp, session.
        yield int(stat.parent.name), int(fields[1]), int(fields[3])


def session_kill(session: int) -> None:
    """SIGKILL every process of the session (the script's servers run in groups of their own)."""
    for pid, _, in_session in processes():
        if in_session == session:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def ready_wait(process: subprocess.Popen[bytes], base_url: str, scene: Scene, log: Path) -> None:
    """Until the server answers an authenticated read (or stop, with the log's end)."""
    deadline = time.monotonic() + READY_SECONDS
    first = scene.clients[0]
    with http_client(base_url, first.token) as http:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the server stopped:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                if http.get(f"/v1/bots/{first.bot_id}/memory").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"no answer in {READY_SECONDS:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def table(total: Tally) -> str:
    header = f"{'route':<16} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'5xx':>5} {'other':>6}"
    lines = [header, "-" * len(header)]
    for route, expected in EXPECTED.items():
        samples = total.latencies.get(route, [])
        answered = {
            status: count for (name, status), count in total.statuses.items() if name == route
        }
        server_errors = sum(count for status, count in answered.items() if status >= 500)
        other = sum(answered.values()) - answered.get(expected, 0) - server_errors
        p50, p95 = (percentile(samples, 0.5), percentile(samples, 0.95)) if samples else (0.0, 0.0)
        lines.append(
            f"{route:<16} {len(samples):>8} {p50:>8.1f} {p95:>8.1f} {server_errors:>5} {other:>6}"
        )
    return "\n".join(lines)


def tracebacks(log: Path) -> tuple[int, str]:
    """How many tracebacks the server logged, and the end of the first one."""
    text = log.read_text(errors="replace")
    count = text.count("Traceback (most recent call last)")
    if not count:
        return 0, ""
    start = text.index("Traceback (most recent call last)")
    return count, text[start : start + 3000].rsplit("\n", 1)[0]


def loadavg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run(args: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory(prefix="openbot-load-") as tmp:
        directory, port = Path(tmp), free_port()
        setup = served(args, directory, port)
        os.environ.update(setup.env)
        if args.setup == "production":
            from bench.__main__ import database_recreate

            database_recreate(args.database_url)

        import django

        django.setup()
        from django.core.management import call_command

        # A line per request (httpx) or per broker channel (pika) otherwise.
        for name in ("httpx", "pika"):
            logging.getLogger(name).setLevel(logging.WARNING)

        call_command("migrate", verbosity=0)
        if args.setup == "production":
            import dramatiq

            import memorybot.tasks  # noqa: F401 — declares the learning queue on the broker

            dramatiq.get_broker().flush_all()
        scene = provision(args.clients, args.bots)
        base_url = f"http://127.0.0.1:{port}"
        # Kept after the run (the rest of the directory goes), for a look at what went wrong.
        log = Path(tempfile.gettempdir()) / f"openbot-load-{args.setup}.log"
        log.unlink(missing_ok=True)
        print(f"[G3] load on {setup.description}")
        print(
            f"{args.clients} clients on {args.bots} bot(s) for {args.seconds:.0f} s; "
            f"{os.cpu_count()} CPUs"
        )
        with serving(setup, log) as process:
            ready_wait(process, base_url, scene, log)
            before = loadavg()
            tallies, took = load(scene, base_url, args.seconds)
            during = loadavg()
            runs, ended_after = learning_settle(scene, args.settle)
            kept, lost, shown = lost_writes(scene, base_url, tallies)
        logged, first = tracebacks(log)

    total = Tally()
    for tally in tallies:
        total.merge(tally)
    requests = sum(total.statuses.values())
    server_errors = sum(count for (_, status), count in total.statuses.items() if status >= 500)
    unended = sum(
        count for status, count in runs.items() if status.split(" ")[0] in ("waiting", "running")
    )
    print(f"load average before {before}, when the load stopped {during}")
    print(f"requests: {requests} in {took:.1f} s = {requests / took:.1f} requests/s")
    print()
    print(table(total))
    print()
    print(f"5xx responses: {server_errors}")
    print(
        f"requests with no answer: {sum(total.failures.values())}"
        + (f" {dict(total.failures)}" if total.failures else "")
    )
    print(
        f"acknowledged writes: {sum(len(tally.remembered) for tally in tallies)} Remembers "
        f"answered 201, {sum(len(tally.forgotten) for tally in tallies)} forgotten by the "
        f"bench, {kept} expected afterwards; lost: {lost}; forgotten but still shown: {shown}"
    )
    print(
        f"learning runs: {sum(runs.values())} {dict(sorted(runs.items()))}; not ended "
        f"{args.settle:.0f} s after the load stopped: {unended}"
        + (f" (all ended {ended_after:.1f} s after)" if ended_after is not None else "")
    )
    print(f"server log: {logged} tracebacks ({log})")
    if first:
        print(first)
    met = server_errors == 0 and lost == 0 and unended == 0
    print(f"targets (0 5xx, 0 lost, 0 unended): {'met' if met else 'NOT met'}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--setup", choices=["embedded", "production"], default="embedded")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument(
        "--bots", type=int, default=1, help="bots the clients share (one memory pool each)"
    )
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument(
        "--settle", type=float, default=60.0, help="seconds learning may take after the load"
    )
    parser.add_argument("--web", type=int, default=2, help="gunicorn workers (production)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--workers", type=int, default=2, help="rundramatiq processes")
    parser.add_argument(
        "--worker-threads", type=int, default=4, help="threads per rundramatiq process"
    )
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="dropped first")
    parser.add_argument("--broker-url", default=DEFAULT_BROKER_URL, help="queues flushed first")
    args = parser.parse_args(argv)
    return 0 if run(args) else 1


if __name__ == "__main__":
    sys.exit(main())
