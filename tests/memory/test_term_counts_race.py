"""[Q1, R7] The pool's term counts (`PoolTerm`, which BM25 reads to tell a crowded pool) stay
its term rows counted while several writers remember entries with the same words at once and
a purge counts others out (PostgreSQL only: parallel writers)."""

from functools import partial

import pytest
from django.db import connection

from memory.forgetting import pool_purge
from memory.models import EntryTerm
from memory.services import entry_remember
from openbot import services
from openbot.models import Bot, Organization, Person
from tests.memory.test_concurrency import Race, in_thread
from tests.memory.test_search import assert_counts_agree

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
    race = Race()

    def write(person: Person) -> None:
        for n in range(ENTRIES):
            remember(bot, person, org, f"Lisbon trams by {person.name}, round {n} harbour")

    def purge() -> None:
        pool_purge(pool_id=bot.id, tag=f"from:{leaving.id}")

    threads = [in_thread(race, partial(write, person)) for person in people]
    threads.append(in_thread(race, purge))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert race.errors == []
    assert_counts_agree(bot)
    assert EntryTerm.objects.filter(bot=bot).values("entry_id").distinct().count() == (
        WRITERS * ENTRIES
    )
