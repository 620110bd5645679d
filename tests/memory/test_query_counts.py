"""[Q4] The hot paths' query counts, pinned so a gain cannot silently regress.

Counts are what Django records for one call, BEGIN and COMMIT included (on PostgreSQL each is
a round trip; SQLite records them too). A route's count includes authentication and the
permission class's lookup of the bot. They do not grow with the entries a reader sees: each
reader below sees several entries with tags and sources.
"""

from typing import Any

import pytest
from django.db import connection

from memory.access import Reader
from memory.search import search
from memory.selectors import context, has_entries
from memory.services import entry_remember
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation

# The pool's lock is one statement on PostgreSQL; SQLite needs none [L1].
LOCK = 1 if connection.vendor == "postgresql" else 0
# GET memory: token, bot with grant level, and the read itself, one statement outside a
# transaction that checks the reader's rights as last read (`test_reads_in_one_statement`).
GET_MEMORY = 3
# GET log: token, bot with grant level, BEGIN, lock, rights, its reads, COMMIT.
GET_LOG = 9 + LOCK
# A change's version, its record and its index rows: one statement on PostgreSQL, three on
# SQLite (`memory.services._logged`).
LOGGED = 1 if connection.vendor == "postgresql" else 3
# Remember: token, bot, BEGIN, the entry, its tags, search terms [R2] and evidence, one insert
# each, and the pool's term counts in one upsert [Q1]; its closure row and derived access data
# in two statements (`graph.refresh_new`: it names no entry); the log; COMMIT; the new entry's
# tags and sources for the answer.
REMEMBER = 12 + LOGGED + LOCK
FORGET = 12 + LOGGED + LOCK
# In-process: the rights (the first time in this process; later they are guessed) and one
# statement: the entries as far as the limit reaches, with their contents, checked in its own
# snapshot [L1] (`test_reads_in_one_statement`).
CONTEXT = 2
# BEGIN, lock, rights, the read, COMMIT.
HAS_ENTRIES = 4 + LOCK
# [R1] BEGIN, lock, rights, one statement that finds and ranks by terms [R7], the vectors of
# the entries the reader sees [R6], the found entries with their tags and sources, the pool's
# version, COMMIT.
SEARCH = 7 + LOCK


@pytest.fixture
def seen(world: World) -> World:
    """Alice sees pinned entries, facts of her channel and an observation over them."""
    for number in range(3):
        entry_remember(
            pool_id=world.bot.id,
            person_id=world.alice.person.id,
            organization_id=world.org.id,
            content=f"pinned {number}",
            topics=["travel"],
        )
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    facts = [
        fact([ItemFactory.create(chat=chat, person=world.alice.person)], topics=["travel"])
        for _ in range(3)
    ]
    observation(facts, audience=f"for:channel:{world.channel.id}")
    return world


def test_get_memory(seen: World, django_assert_max_num_queries: Any) -> None:
    client, url = seen.alice.client(), f"/v1/bots/{seen.bot.id}/memory"
    client.get(url)  # the token's last use is written at most once a minute
    with django_assert_max_num_queries(GET_MEMORY):
        response = client.get(url)
    assert response.status_code == 200 and len(response.json()["entries"]) >= 7


def test_get_log(seen: World, django_assert_max_num_queries: Any) -> None:
    client, url = seen.alice.client(), f"/v1/bots/{seen.bot.id}/memory/log"
    client.get(url)
    with django_assert_max_num_queries(GET_LOG):
        response = client.get(url)
    assert response.status_code == 200 and response.json()["changes"]


def test_remember(seen: World, django_assert_max_num_queries: Any) -> None:
    client, url = seen.bob.client(), f"/v1/bots/{seen.bot.id}/memory"
    client.get(url)
    body = {"command": {"_tag": "Remember", "content": "keep this", "tags": ["travel"]}}
    with django_assert_max_num_queries(REMEMBER):
        response = client.post(url, body, format="json")
    assert response.status_code == 201


def test_forget(seen: World, django_assert_max_num_queries: Any) -> None:
    client, url = seen.alice.client(), f"/v1/bots/{seen.bot.id}/memory"
    entry_id = client.get(url).json()["entries"][0]["id"]
    with django_assert_max_num_queries(FORGET):
        response = client.post(url, {"command": {"_tag": "Forget", "id": entry_id}}, format="json")
    assert response.status_code == 200


def reader(world: World) -> Reader:
    return Reader(organization_id=world.org.id, person_id=world.alice.person.id, bot=world.bot)


def test_context(seen: World, django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(CONTEXT):
        used = context(seen.bot, reader(seen), 4000)
    assert len(used.entry_ids) >= 7


def test_has_entries(seen: World, django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(HAS_ENTRIES):
        assert has_entries(seen.bot, reader(seen))


def test_search(seen: World, django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(SEARCH):
        found, _ = search(seen.bot, reader(seen), "pinned", 10)
    assert len(found) == 3
