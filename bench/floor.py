"""[Q4] The hot paths next to their floor, in one run: `python -m bench --floor`.

For each pool (`--sizes`, built or reused by `bench.pool`) and two readers — one who sees 10
entries (a member in no channel with 10 pinned entries of their own) and the [Q1] reader who
sees about 1,000 — it times:

- the floor: one raw SQL statement of exactly the rows the response holds, the decryption of
  their content and the JSON encoding of the body (for Remember: one statement writing the
  entry, its tags, evidence, closure row, the version and the change record), prepared on
  PostgreSQL as the real paths' compiled queries are (`openbot.compiled.cursor`);
- the selector (or service) in-process, with the same JSON encoding (the API's own,
  `openbot.renderers.json_bytes`);
- the route over HTTP against gunicorn with production settings (DEBUG off), with a new
  connection per request and with one kept-alive connection.

`context(4000)` and `has_entries` are server-side calls with no route of their own: floor and
in-process only. Each figure is printed with its ratio to the floor of the same run and the
queries one call ran (for HTTP: the whole request through Django's test client in-process).
"""

import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench import pool as bench_pool
from bench.timing import Timing, timed
from memory.access import Reader
from memory.models import Change, Closure, Entry, EntryTag, Evidence, Pool
from memory.selectors import context, entries_for_reader, has_entries
from memory.services import entry_remember
from openbot import compiled, ids, services
from openbot.fields import decrypt_all, keyring
from openbot.models import Bot, Organization, Person
from openbot.renderers import json_bytes

ROOT = Path(__file__).resolve().parent.parent
CONTEXT_LIMIT = 4000
TEN = 10
READY_SECONDS = 60.0
REMEMBERED = "a short fact someone asked the bot to keep for them"


@dataclass(frozen=True)
class Figure:
    pool_size: int
    reader: str
    operation: str
    path: str
    timing: Timing
    queries: int | None
    floor_ms: float

    @property
    def ratio(self) -> float:
        return self.timing.p50_ms / self.floor_ms if self.floor_ms else 0.0


# -- the floors -----------------------------------------------------------------------------


def _table(model: type[Any]) -> str:
    return str(model._meta.db_table)


def _column(model: type[Any], name: str) -> str:
    return str(model._meta.get_field(name).column)


def floor_entries(entry_ids: list[str]) -> Callable[[], bytes]:
    """One statement of the response's entries with their tags and sources, decrypted, JSON."""
    entry, tag = _table(Entry), _table(EntryTag)
    sql = f"""
        SELECT e.id, e.layer, e.content, e.status, e.created_at, e.updated_at,
               e.invalidated_at, e.said_at, e.confidence,
               ARRAY(SELECT t.tag FROM {tag} t WHERE t.entry_id = e.id ORDER BY t.id),
               ARRAY(SELECT ARRAY[s.chat_id, s.item_seq::text, s.source_entry_id]
                     FROM memory_entrysource s WHERE s.entry_id = e.id ORDER BY s.position)
        FROM {entry} e WHERE e.id = ANY(%s)
        ORDER BY e.rank, e.updated_at DESC, e.id
    """

    def call() -> bytes:
        with compiled.cursor() as cursor:
            cursor.execute(sql, [entry_ids])
            rows = cursor.fetchall()
        texts = decrypt_all([row[2] for row in rows])
        bodies = []
        for row, text in zip(rows, texts, strict=True):
            id_, layer, _, status, created, updated, invalidated, said, conf, tags, srcs = row
            body: dict[str, Any] = {
                "id": id_,
                "layer": layer,
                "content": text,
                "tags": tags,
                "sources": [
                    {"entry": source} if source else {"chat": chat, "item": f"i-{seq}"}
                    for chat, seq, source in srcs
                ],
                "status": status,
                "createdAt": created,
                "updatedAt": updated,
                "saidAt": said,
            }
            if invalidated is not None:
                body["invalidatedAt"] = invalidated
            if layer == "observation":
                body["confidence"] = conf
            bodies.append(body)
        return json_bytes({"entries": bodies, "version": 0})

    return call


def floor_context(entry_ids: list[str]) -> Callable[[], str]:
    """One statement of the contents `context` returns, decrypted and joined."""
    sql = f"SELECT id, content FROM {_table(Entry)} WHERE id = ANY(%s)"

    def call() -> str:
        with compiled.cursor() as cursor:
            cursor.execute(sql, [entry_ids])
            rows = cursor.fetchall()
        texts = decrypt_all([content for _, content in rows])
        contents = {entry_id: text for (entry_id, _), text in zip(rows, texts, strict=True)}
        return "".join(f"- {contents[entry_id]}\n" for entry_id in entry_ids)

    return call


def floor_has_entries(entry_id: str) -> Callable[[], bool]:
    """One indexed lookup of an entry known to be visible."""
    sql = f"SELECT EXISTS (SELECT 1 FROM {_table(Entry)} WHERE id = %s)"

    def call() -> bool:
        with compiled.cursor() as cursor:
            cursor.execute(sql, [entry_id])
            return bool(cursor.fetchone()[0])

    return call


def floor_remember(*, bot_id: str, person_id: str, organization_id: str) -> Callable[[], bytes]:
    """One statement writing what a Remember writes (entry, tags, evidence, closure row, the
    version, the change record), after encrypting content and payload; the body as JSON."""
    bot_column = _column(Entry, "bot")
    sql = f"""
        WITH e AS (
            INSERT INTO {_table(Entry)} (id, {bot_column}, layer, content, content_length,
                status, created_at, updated_at, said_at, rank, intact, blockers, sound,
                depends, org_scope, rule_scope)
            VALUES (%(id)s, %(bot)s, 'pinned', %(content)s, %(length)s, 'active', %(at)s,
                %(at)s, %(at)s, 0, true, 0, true, false, %(org)s, %(scope)s)
            RETURNING id
        ), t AS (
            INSERT INTO {_table(EntryTag)} (entry_id, {_column(EntryTag, "bot")}, tag, kind)
            SELECT e.id, %(bot)s, x.tag, x.kind FROM e, unnest(%(tags)s::text[], %(kinds)s::text[])
                AS x(tag, kind)
        ), v AS (
            INSERT INTO {_table(Evidence)} (entry_id, rule, organization_id, chat_id, item_seq)
            SELECT e.id, %(rule)s, %(org)s, '', 0 FROM e
        ), c AS (
            INSERT INTO {_table(Closure)} (entry_id, ancestor_id) SELECT e.id, e.id FROM e
        ), p AS (
            UPDATE {_table(Pool)} SET version = version + 1 WHERE bot_id = %(bot)s
            RETURNING version
        ), g AS (
            INSERT INTO {_table(Change)} ({_column(Change, "bot")}, version, at, by, payload)
            SELECT %(bot)s, p.version, %(at)s, 'person', %(payload)s FROM p RETURNING id
        )
        INSERT INTO memory_changeentry (change_id, entry_id) SELECT g.id, e.id FROM g, e
    """
    encrypt = keyring().encrypt
    tags = [f"from:{person_id}", f"for:person:{person_id}", f"org:{organization_id}"]
    written: list[str] = []

    def call() -> bytes:
        entry_id, at = ids.new_id("mem"), int(time.time() * 1000)
        operations = json.dumps([{"id": entry_id, "op": "add", "content": REMEMBERED}])
        with transaction.atomic(), compiled.cursor() as cursor:
            cursor.execute(
                sql,
                {
                    "id": entry_id,
                    "bot": bot_id,
                    "content": encrypt(REMEMBERED.encode()).decode(),
                    "length": len(REMEMBERED),
                    "at": at,
                    "tags": tags,
                    "kinds": [tag.split(":", 1)[0] for tag in tags],
                    "rule": f"person:{person_id}",
                    "org": organization_id,
                    "scope": f"{organization_id} person:{person_id}",
                    "payload": encrypt(operations.encode()).decode(),
                },
            )
        written.append(entry_id)
        body = {"id": entry_id, "layer": "pinned", "content": REMEMBERED, "tags": tags}
        return json_bytes(body | {"sources": [], "status": "active", "createdAt": at})

    return call


# -- the server -----------------------------------------------------------------------------


@contextmanager
def gunicorn(port: int) -> Iterator[None]:
    """gunicorn with production settings as `scripts/serve_prod.sh` starts it (2 workers × 4
    threads, keep-alive 5 s) on the bench database, with the key the pools were written with."""
    env = dict(os.environ) | {
        "DJANGO_SETTINGS_MODULE": "settings.production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "OPENBOT_ENCRYPTION_KEYS": ",".join(keyring_keys()),
        "OPENBOT_BROKER_URL": os.environ.get("OPENBOT_BROKER_URL", "redis://127.0.0.1:6379/0"),
        "OPENBOT_INPROCESS_WORKER": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
    }
    log = Path(tempfile.gettempdir()) / "openbot-floor-gunicorn.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "settings.wsgi:application", "--workers", "2",
             "--threads", "4", "--keep-alive", "5", "--bind", f"127.0.0.1:{port}",
             "--no-control-socket"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            if process.poll() is not None:
                raise SystemExit(f"gunicorn stopped:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("gunicorn did not listen in time") from None
                time.sleep(0.3)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def keyring_keys() -> list[str]:
    from django.conf import settings

    return list(settings.OPENBOT_ENCRYPTION_KEYS)


class Http:
    """Requests to the server, over a new connection each or one kept alive."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Host": "127.0.0.1"}
        self.kept: http.client.HTTPConnection | None = None

    def call(self, method: str, url: str, body: Any = None, *, keep_alive: bool) -> bytes:
        if keep_alive:
            if self.kept is None:
                self.kept = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            conn = self.kept
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, url, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if not keep_alive:
            conn.close()
        if response.status >= 300:
            raise SystemExit(f"{method} {url}: {response.status} {data[:300]!r}")
        return data


# -- the readers ----------------------------------------------------------------------------


def person_with(organization: Organization, name: str) -> Person:
    """The bench person `name` of the organization, created the first time."""
    found = Person.objects.filter(memberships__organization=organization, name=name).first()
    return found or services.person_create(organization=organization, name=name)


def ten_entries(bot: Bot, person: Person, organization: Organization) -> None:
    """The ten pinned entries of the 10-entry reader, written through Remember once."""
    reader = Reader(organization_id=organization.id, person_id=person.id, bot=bot)
    present = len(entries_for_reader(pool_id=bot.id, reader=reader, tags=[])[0])
    for number in range(present, TEN):
        entry_remember(
            pool_id=bot.id,
            person_id=person.id,
            organization_id=organization.id,
            content=f"the ten-entry reader's fact number {number}",
            topics=[],
        )


def queries_of(call: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def measure(
    built: bench_pool.BuiltPool, world: bench_pool.World, port: int, *, runs: int
) -> list[Figure]:
    bot, organization = built.bot, world.organization
    ten = person_with(organization, "zz-floor-ten")
    ten_entries(bot, ten, organization)
    writer = person_with(organization, "zz-floor-writer")
    figures: list[Figure] = []
    for person in (ten, world.chosen):
        figures += measure_reader(built, organization, person, port, runs=runs)
    figures += measure_remember(built, organization, writer, port, runs=runs)
    return figures


def measure_reader(
    built: bench_pool.BuiltPool,
    organization: Organization,
    person: Person,
    port: int,
    *,
    runs: int,
) -> list[Figure]:
    bot = built.bot
    reader = Reader(organization_id=organization.id, person_id=person.id, bot=bot)
    token = services.token_create(person=person, organization=organization)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    server = Http(port, token)
    url = f"/v1/bots/{bot.id}/memory"

    def listing() -> bytes:
        found, version = entries_for_reader(pool_id=bot.id, reader=reader, tags=[])
        return json_bytes({"entries": found, "version": version})

    entries = json.loads(listing())["entries"]
    label = f"sees {len(entries)}"
    used = context(bot, reader, CONTEXT_LIMIT)
    assert has_entries(bot, reader)
    few = max(runs // 4, 20) if len(entries) > 100 else runs
    figures: list[Figure] = []

    def add(operation: str, floor: Callable[[], object], paths: dict[str, Any]) -> None:
        floor_timing = timed(floor, runs=few)
        figures.append(
            Figure(built.size, label, operation, "floor", floor_timing, 1, floor_timing.p50_ms)
        )
        for path, (call, queries) in paths.items():
            figures.append(
                Figure(
                    built.size,
                    label,
                    operation,
                    path,
                    timed(call, runs=few),
                    queries,
                    floor_timing.p50_ms,
                )
            )

    add(
        "GET memory",
        floor_entries([entry["id"] for entry in entries]),
        {
            "in-process": (listing, queries_of(listing)),
            "HTTP new conn": (
                lambda: server.call("GET", url, keep_alive=False),
                queries_of(lambda: client.get(url)),
            ),
            "HTTP keep-alive": (lambda: server.call("GET", url, keep_alive=True), None),
        },
    )
    add(
        "context(4000)",
        floor_context(used.entry_ids),
        {
            "in-process": (
                lambda: context(bot, reader, CONTEXT_LIMIT),
                queries_of(lambda: context(bot, reader, CONTEXT_LIMIT)),
            )
        },  # fmt: skip
    )
    add(
        "has_entries",
        floor_has_entries(entries[0]["id"]),
        {
            "in-process": (
                lambda: has_entries(bot, reader),
                queries_of(lambda: has_entries(bot, reader)),
            )
        },  # fmt: skip
    )
    return figures


def measure_remember(
    built: bench_pool.BuiltPool, organization: Organization, writer: Person, port: int, *, runs: int
) -> list[Figure]:
    bot = built.bot
    token = services.token_create(person=writer, organization=organization)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    server = Http(port, token)
    url = f"/v1/bots/{bot.id}/memory"
    body = {"command": {"_tag": "Remember", "content": REMEMBERED}}

    def in_process() -> bytes:
        entry = entry_remember(
            pool_id=bot.id,
            person_id=writer.id,
            organization_id=organization.id,
            content=REMEMBERED,
            topics=[],
        )
        return json_bytes({"id": entry.id})

    floor = floor_remember(bot_id=bot.id, person_id=writer.id, organization_id=organization.id)
    floor_timing = timed(floor, runs=runs)
    paths = {
        "in-process": (in_process, queries_of(in_process)),
        "HTTP new conn": (
            lambda: server.call("POST", url, body, keep_alive=False),
            queries_of(lambda: client.post(url, body, format="json")),
        ),
        "HTTP keep-alive": (lambda: server.call("POST", url, body, keep_alive=True), None),
    }
    figures = [
        Figure(built.size, "writer", "Remember", "floor", floor_timing, 1, floor_timing.p50_ms)
    ]
    for path, (call, queries) in paths.items():
        timing = timed(call, runs=runs)
        figures.append(
            Figure(built.size, "writer", "Remember", path, timing, queries, floor_timing.p50_ms)
        )
    return figures


def table(figures: list[Figure]) -> str:
    header = (
        f"{'pool':>8}  {'reader':<18} {'operation':<14} {'path':<16}"
        f"{'p50 ms':>8} {'p95 ms':>8} {'runs':>5} {'queries':>8} {'× floor':>8}"
    )
    lines = [header, "-" * len(header)]
    for figure in figures:
        queries = "-" if figure.queries is None else str(figure.queries)
        lines.append(
            f"{figure.pool_size:>8,}  {figure.reader:<18} {figure.operation:<14} "
            f"{figure.path:<16}{figure.timing.p50_ms:>8.2f} {figure.timing.p95_ms:>8.2f} "
            f"{figure.timing.runs:>5} {queries:>8} {figure.ratio:>7.1f}×"
        )
    return "\n".join(lines)


def run(*, sizes: list[int], runs: int, reuse: bool) -> None:
    """Build (or reuse) the world and pools, serve them with gunicorn, print the figures."""
    world = bench_pool.world_find() if reuse else None
    if world is None:
        bench_pool.world_remove()
        world = bench_pool.world_build()
    built = []
    for size in sizes:
        # The runs' own Remembers add to a pool: one at least as large is reused.
        bot = Bot.objects.filter(organization=world.organization, name=f"bench-{size}").first()
        found = None
        if reuse and bot is not None and Entry.objects.filter(bot=bot).count() >= size:
            found = bench_pool.BuiltPool(bot=bot, size=size, build_seconds=0.0)
        if found is None:
            found = bench_pool.pool_build(world, size=size)
            print(f"built the {size:,}-entry pool in {found.build_seconds:.1f} s", flush=True)
        built.append(found)
    from bench.load import free_port

    port = free_port()
    with gunicorn(port):
        figures = [figure for each in built for figure in measure(each, world, port, runs=runs)]
    print()
    print(table(figures))
