"""[F8] PostgreSQL unreachable: every route that needs the database answers 503 with
`Retry-After` and `code: "unavailable"`, never a 500; the log tells the burst in a line or two
with no traceback; when PostgreSQL is back the same server thread answers again, no restart.

Driven for real: the project is served by Django's WSGI handler in one thread (as gunicorn
serves it) and talks to PostgreSQL through a forwarder that refuses, cuts or answers as a
server starting up (tests/unreachable_database.py). SQLite cannot be unreachable."""

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection, transaction
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from chats.models import Turn
from chats.services import turns_end_abandoned
from memory.lock import pool_write
from openbot.errors import database_unreachable
from openbot.outage import OutageLog
from tests.conftest import World
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import FAKE_MODEL, bot_model_set
from tests.unreachable_database import Answer, Forwarder, forwarded_database, served

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's outages"),
    pytest.mark.django_db(transaction=True),
]

# Routes that need no database: they answer as usual while it is gone.
WITHOUT_DATABASE = {"/healthz", "/v1/schema", "/v1/docs"}
CSRF = "c" * 32  # a well-formed CSRF token, sent as cookie and header (the admin's POSTs)


def assert_unavailable(answer: Answer, message: str = "database unreachable") -> None:
    assert answer.status == 503, (answer.status, answer.body[:300])
    assert answer.headers["Retry-After"] == "5"
    assert answer.json() == {"error": {"code": "unavailable", "message": message}}


def every_route() -> Iterator[str]:
    """One path for each URL pattern of the project, with made-up ids."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[str]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            else:
                assert isinstance(pattern, URLPattern)
                yield "/" + made_up(route)

    yield from walk(get_resolver().url_patterns, "")


def made_up(route: str) -> str:
    """`route` with an id for each of its groups (an alternation's first) and converters."""
    route = re.sub(
        r"\(\?P<\w+>([^)]*)\)",
        lambda group: group[1].split("|")[0] if "|" in group[1] else "1",
        route,
    )
    return re.sub(r"<(?:\w+:)?\w+>", "1", route)


@pytest.fixture
def staff_session(db: Any) -> str:
    """The session cookie of a support account logged in to the admin."""
    user = User.objects.create_user(username="support", password="pw-support", is_staff=True)
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


@pytest.fixture
def outage_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO):
        yield caplog


def lines_of(log: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The outage's lines, and any error or traceback logged meanwhile."""
    return [
        record
        for record in log.records
        if record.name == "openbot.outage" or record.levelno >= logging.ERROR or record.exc_info
    ]


def test_every_route_answers_503_while_postgresql_refuses_and_serves_again_after(
    world: World, staff_session: str, outage_log: pytest.LogCaptureFixture
) -> None:
    headers = {
        "Authorization": f"Bearer {world.alice.token}",
        "Cookie": f"sessionid={staff_session}; csrftoken={CSRF}",
        "X-CSRFToken": CSRF,
    }
    memory = f"/v1/bots/{world.bot.id}/memory"
    with forwarded_database(CONN_MAX_AGE=60) as forwarder, served() as server:
        assert server.call("GET", memory, headers=headers).status == 200
        forwarder.refuse()
        outage_log.clear()
        answered: dict[tuple[str, str], Answer] = {}
        for path in [*every_route(), "/no-such-page", "/v1/no-such-route"]:
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                answered[method, path] = server.call(method, path, body={}, headers=headers)
        assert not [key for key, answer in answered.items() if answer.status in (500, 502, 504)]
        assert all(answer.status < 500 or answer.status == 503 for answer in answered.values())
        for answer in answered.values():
            if answer.status == 503:
                assert_unavailable(answer)
        served_anyway = {
            (method, path): answer.status
            for (method, path), answer in answered.items()
            if answer.status != 503
        }
        # /readyz says so (503) on GET; its other methods, like an unknown URL, need nothing.
        assert {path for _, path in served_anyway if not path.startswith("/me/")} == (
            WITHOUT_DATABASE | {"/readyz", "/no-such-page", "/v1/no-such-route"}
        )
        # The page for people needs nothing for a method it does not take (405), for the
        # sign-in button, or to refuse a link whose signature is wrong; all else is a 503.
        assert {
            (method, path, status)
            for (method, path), status in served_anyway.items()
            if path.startswith("/me/") and status != 405
        } == {("GET", "/me/sign-in/1", 200), ("POST", "/me/sign-in/1", 400)}
        assert answered["GET", "/me/bots/1/"].status == 503
        assert answered["GET", "/healthz"].json() == {"status": "ok"}
        assert answered["GET", "/v1/no-such-route"].status == 404
        assert len(answered) > 1000
        # [F8] One line for the burst of a thousand 503s, no traceback.
        lines = lines_of(outage_log)
        assert [record.levelno for record in lines] == [logging.WARNING], lines
        assert lines[0].exc_info is None
        assert "database unreachable" in lines[0].getMessage()

        forwarder.listen()
        assert server.call("GET", memory, headers=headers).status == 200
        assert server.call("GET", "/admin/", headers=headers).status == 200
        lines = lines_of(outage_log)
        assert len(lines) == 2 and lines[1].exc_info is None
        ended = r"database reachable again after \d+ s: \d{4} requests answered 503"
        assert re.fullmatch(ended, lines[1].getMessage())


def test_a_connection_lost_mid_request_is_503_and_the_thread_reconnects(
    world: World, outage_log: pytest.LogCaptureFixture
) -> None:
    """A Remember waiting for the pool's lock when its connection is cut; the server thread
    keeps its connection between requests (CONN_MAX_AGE), as production does."""
    client = {"Authorization": f"Bearer {world.alice.token}"}
    memory = f"/v1/bots/{world.bot.id}/memory"
    remember = {"command": {"_tag": "Remember", "content": "green tea"}}
    production = {"CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}
    with forwarded_database(**production) as forwarder, served() as server:
        assert server.call("GET", memory, headers=client).status == 200
        answer = while_waiting_for_the_lock(
            world, forwarder, lambda: server.call("POST", memory, remember, client), forwarder.cut
        )
        assert_unavailable(answer)
        forwarder.refuse()
        assert_unavailable(server.call("GET", memory, headers=client))
        forwarder.listen()
        assert server.call("POST", memory, remember, client).status == 201
        # PostgreSQL ends the backend (57P01) under a request: 503, and the next one passes.
        answer = while_waiting_for_the_lock(
            world, forwarder, lambda: server.call("POST", memory, remember, client), terminate
        )
        assert_unavailable(answer)
        assert server.call("GET", memory, headers=client).json()["entries"][0]["content"] == (
            "green tea"
        )
    assert all(record.exc_info is None for record in lines_of(outage_log))
    assert len(lines_of(outage_log)) == 4  # two bursts, each a start and an end


def test_a_server_that_is_starting_up_is_503(world: World) -> None:
    memory = f"/v1/bots/{world.bot.id}/memory"
    client = {"Authorization": f"Bearer {world.alice.token}"}
    with forwarded_database() as forwarder, served() as server:
        forwarder.starting_up()
        assert_unavailable(server.call("GET", memory, headers=client))
        forwarder.refusal = None
        assert server.call("GET", memory, headers=client).status == 200


def test_a_turn_whose_database_goes_away_mid_turn_is_503_not_500(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The person's words are stored, the bot's model is answering, PostgreSQL goes."""
    bot_model_set(world.bot, FAKE_MODEL)
    fake_openai.reply(content="Green tea it is.", delay=0.5)
    client = {"Authorization": f"Bearer {world.alice.token}"}
    with forwarded_database() as forwarder, served() as server:
        chat = server.call("POST", "/v1/chats", {"bot": world.bot.id}, client).json()["id"]
        replies: list[Answer] = []
        turn = threading.Thread(
            target=lambda: replies.append(
                server.call("POST", f"/v1/chats/{chat}/turns", {"text": "tea?"}, client)
            )
        )
        turn.start()
        assert fake_openai.wait_for_requests(1)
        forwarder.refuse()
        turn.join(timeout=30)
        assert_unavailable(replies[0])
        forwarder.listen()
        assert server.call("GET", f"/v1/chats/{chat}", headers=client).status == 200
    # The recovery pass ends such a turn later [C6]; here at once, for the fixture's check.
    assert turns_end_abandoned(started_before=timezone.now()) == 1
    assert Turn.objects.get(chat_id=chat).error == Turn.Error.ABANDONED


def test_a_views_error_is_answered_before_django_makes_it_a_500(world: World) -> None:
    """Django's test client raises any error that reaches Django's 500 handling."""
    memory = f"/v1/bots/{world.bot.id}/memory"
    client = world.alice.client()
    with forwarded_database() as forwarder:
        connection.close()  # this thread's next connection goes through the forwarder too
        forwarder.refuse()
        response = client.get(memory)
        forwarder.listen()
        assert client.get(memory).status_code == 200
    connection.close()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"


class UserSeenBeforeTheView:
    """A middleware that reads who is logged in before any view runs, as many do."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.user.is_authenticated  # noqa: B018  (loads the session)
        return self.get_response(request)


def test_an_error_raised_in_a_middleware_is_503_and_logged_once(
    world: World, staff_session: str, settings: Any, outage_log: pytest.LogCaptureFixture
) -> None:
    after = settings.MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware")
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE[: after + 1],
        f"{__name__}.UserSeenBeforeTheView",
        *settings.MIDDLEWARE[after + 1 :],
    ]
    cookie = {"Cookie": f"sessionid={staff_session}"}
    with forwarded_database() as forwarder, served() as server:
        forwarder.refuse()
        for path in ("/v1/schema", "/no-such-page", "/admin/"):
            assert_unavailable(server.call("GET", path, headers=cookie))
        forwarder.listen()
        assert server.call("GET", "/admin/", headers=cookie).status == 200
    lines = lines_of(outage_log)
    assert len(lines) == 2 and all(record.exc_info is None for record in lines), lines


def test_a_lock_timeout_stays_a_500(world: World) -> None:
    """An OperationalError about the statement, not the connection, is not an outage."""
    memory = f"/v1/bots/{world.bot.id}/memory"
    remember = {"command": {"_tag": "Remember", "content": "green tea"}}
    client = {"Authorization": f"Bearer {world.alice.token}"}
    options = {**connection.settings_dict["OPTIONS"]}
    options["options"] = f"{options.get('options', '')} -c lock_timeout=200".strip()
    with forwarded_database(OPTIONS=options) as forwarder, served() as server:
        answer = while_waiting_for_the_lock(
            world, forwarder, lambda: server.call("POST", memory, remember, client), None
        )
    assert answer.status == 500
    assert answer.json()["error"]["code"] == "server_error"


def test_only_connection_errors_are_unreachable(db: Any) -> None:
    """Real errors, classified: the statement's own are not an outage."""
    with (
        pytest.raises(OperationalError) as timeout,
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SET LOCAL statement_timeout = 1")
        cursor.execute("SELECT pg_sleep(1)")
    assert isinstance(timeout.value.__cause__, psycopg.errors.QueryCanceled)
    assert not database_unreachable(timeout.value)
    assert database_unreachable(refused_error())


def test_the_outage_log_counts_at_most_once_a_period(
    db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    refused = refused_error()
    log = OutageLog(report_every_s=0.2)
    with caplog.at_level(logging.WARNING, logger="openbot.outage"):
        for _ in range(10):
            log.answered(refused)
        time.sleep(0.25)
        log.answered(refused)
        log.reachable()
        log.reachable()
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 3, said
    assert said[0].startswith("database unreachable (OperationalError: connection failed:")
    assert said[1] == "database still unreachable after 0 s: 11 requests answered 503"
    assert said[2] == "database reachable again after 0 s: 11 requests answered 503"


# --- helpers --------------------------------------------------------------------------------


def refused_error() -> OperationalError:
    """The error Django raises when nothing listens where PostgreSQL should."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    probe = connection.copy()
    probe.settings_dict["PORT"] = str(port)
    try:
        probe.ensure_connection()
    except OperationalError as exc:
        return exc
    finally:
        probe.close()
    raise AssertionError("the connection was not refused")


def while_waiting_for_the_lock(
    world: World,
    forwarder: Forwarder,
    request: Callable[[], Answer],
    then: Callable[[], None] | None,
) -> Answer:
    """`request` sent while this thread holds the bot's pool lock; once the server's query
    waits for it, `then()` if given; the answer."""
    answers: list[Answer] = []
    sender = threading.Thread(target=lambda: answers.append(request()))
    with pool_write(world.bot.pool_bot_id):
        sender.start()
        if then is not None:
            wait_for_the_lock(forwarder)
            then()
        sender.join(timeout=30)
    assert answers, "no answer"
    return answers[0]


def wait_for_the_lock(forwarder: Forwarder) -> None:
    """Until the server's backend waits for a lock."""
    with psycopg.connect(**direct_connection(), autocommit=True) as watcher:
        for _ in range(200):
            row = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND client_port = ANY(%s)",
                [forwarder.upstream_ports()],
            ).fetchone()
            if row:
                return
            time.sleep(0.05)
    raise AssertionError("the request never waited for the lock")


def terminate() -> None:
    """PostgreSQL ends the backends that wait for a lock held by this test's connection."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE %s = ANY(pg_blocking_pids(pid))",
            [connection.connection.info.backend_pid],
        )


def direct_connection() -> dict[str, Any]:
    """Where this thread's own connection goes (the settings name the forwarder meanwhile)."""
    info = connection.connection.info
    return {"host": info.host, "port": info.port, "user": info.user, "dbname": info.dbname}
