"""[Q1, R7] The pool's term counts (`PoolTerm`, which BM25 reads to tell a crowded pool) stay
its term rows counted while several writers remember entries with the same words at once and
a purge counts others out (PostgreSQL only: parallel writers)."""

import threading
from collections.abc import Callable
from functools import partial

import pytest
from django.db import connection, connections
from django.db.models import Count

from memory.forgetting import pool_purge
from memory.models import EntryTerm, PoolTerm
from memory.services import entry_remember
from openbot import services
from openbot.models import Bot, Organization, Person

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="parallel writers need PG"),
    pytest.mark.django_db(transaction=True),
]

WRITERS = 3
ENTRIES = 15


def remember(bot: Bot, person: Person, org: Organization, content: str) -> None:
    entry_remember(
        pool_id=bot.id, person_id=person.id, organization_id=org.id, content=content, topics=[]
    )


def test_counts_agree_after_parallel_writers_and_a_purge() -> None:
    org = services.organization_create(name="Org")
    bot = services.bot_create(organization=org)
    people = [services.person_create(organization=org, name=f"p{n}") for n in range(WRITERS)]
    leaving = services.person_create(organization=org, name="leaving")
    for n in range(ENTRIES):
        remember(bot, leaving, org, f"Lisbon trams and the harbour, note {n}")
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS + 1)

    def in_thread(work: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                start.wait()
                work()
            except BaseException as error:  # reported by the test, not lost in the thread
                errors.append(error)
            finally:
                connections.close_all()

        return threading.Thread(target=run)

    def write(person: Person) -> None:
        for n in range(ENTRIES):
            remember(bot, person, org, f"Lisbon trams by {person.name}, round {n} harbour")

    def purge() -> None:
        pool_purge(pool_id=bot.id, tag=f"from:{leaving.id}")

    threads = [in_thread(partial(write, person)) for person in people]
    threads.append(in_thread(purge))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    held = EntryTerm.objects.filter(bot=bot).values("term").annotate(n=Count("*"))
    counted = dict(PoolTerm.objects.filter(bot=bot).values_list("term", "entries"))
    assert counted == {row["term"]: row["n"] for row in held}
    assert EntryTerm.objects.filter(bot=bot).values("entry_id").distinct().count() == (
        WRITERS * ENTRIES
    )
