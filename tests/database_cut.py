"""[C6, F9] A PostgreSQL connection cut while a turn waits for the bot's model: the server ends
the connection of the thread that runs the turn (as a restart of the database does) and, for
an outage, refuses new connections until the turn is over."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import connection

from tests.fakes.openai_server import FakeOpenAI

# How long the fake model takes to answer while the cut is made: room for the cut's thread to
# run on a busy machine (with 0.5 s a CI run once cut after the answer, not during it).
ANSWER_DELAY_S = 3.0


def backend_pid() -> int:
    """The server process of this thread's connection, which the test client's requests use."""
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@contextmanager
def cut_while_the_model_answers(fake: FakeOpenAI, *, outage: bool = False) -> Iterator[None]:
    """Once `fake` is asked (the turn's person item is stored by then), end this thread's
    connection; with `outage`, refuse new ones too until the block is over."""
    pid = backend_pid()
    settings = connection.settings_dict
    database = settings["NAME"]
    server = psycopg.connect(
        dbname="postgres", host=settings["HOST"], port=settings["PORT"] or None,
        user=settings["USER"], autocommit=True,
    )  # fmt: skip

    def cut() -> None:
        assert fake.wait_for_requests(1)
        if outage:
            server.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        server.execute("SELECT pg_terminate_backend(%s)", [pid])

    thread = threading.Thread(target=cut)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        server.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        server.close()
