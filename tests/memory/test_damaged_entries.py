"""[X5] Damaged entries and change-log payloads never take a memory route down.

A flipped byte in one entry's stored content, or a dropped key, leaves GET memory answering 200
with every other entry, the log unchanged (it reads no payload), Remember, Forget and purge
working; `context` and `learning_context` leave the entry out and go on, and so does a turn's
enrichment. The server logs table, row id and column, never the token or the content.
"""

import logging
from typing import Any

import pytest
from cryptography.fernet import Fernet

from memory.access import Reader
from memory.models import Change, Entry
from memory.selectors import context, learning_context
from memorybot.models import Enrichment
from tests.conftest import Actor, World
from tests.factories import ChatFactory, EntryFactory, ItemFactory
from tests.memory.builders import fact
from tests.memorybot.scenes import (
    OFFLINE_MODEL,
    bot_model_set,
    chat_open,
    memory_model_set,
    take_turn,
)
from tests.openbot.damage import flip_a_byte, stored_value

CONTENTS = [
    "The Basel train leaves at nine",
    "Alice sits by the window on the Basel train",
    "Alice books the Basel train herself",
]


@pytest.fixture
def pool(world: World) -> list[Entry]:
    """Alice's three entries (two pins and a fact) and one pin of bob's."""
    entries = [
        EntryFactory.create(author=world.alice, bot=world.bot, content=content)
        for content in CONTENTS[:2]
    ]
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    entries.append(
        fact(
            [ItemFactory.create(chat=chat, person=world.alice.person, text=CONTENTS[2])],
            content=CONTENTS[2],
        )
    )
    EntryFactory.create(author=world.bob, bot=world.bot, content="Bob prefers the early train")
    return entries


def memory(actor: Actor, world: World, query: str = "") -> dict[str, Any]:
    response = actor.client().get(f"/v1/bots/{world.bot.id}/memory{query}")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def log(actor: Actor, world: World) -> dict[str, Any]:
    response = actor.client().get(f"/v1/bots/{world.bot.id}/memory/log")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def reader(world: World, actor: Actor) -> Reader:
    return Reader.person(bot=world.bot, person_id=actor.person.id, organization_id=world.org.id)


def assert_logged(
    caplog: pytest.LogCaptureFixture, table: str, ids: list[str], column: str
) -> None:
    lines = {record.getMessage() for record in caplog.records if record.name == "openbot.fields"}
    assert lines == {
        f"left out a row no key opens: table={table} id={pk} column={column}" for pk in ids
    }


def assert_no_content_or_token_logged(caplog: pytest.LogCaptureFixture, tokens: list[str]) -> None:
    for token in tokens:
        assert token[:16] not in caplog.text and token[-16:] not in caplog.text
    for content in CONTENTS:
        assert content not in caplog.text and "Basel" not in caplog.text


def test_get_memory_answers_200_with_every_other_entry(
    world: World, pool: list[Entry], caplog: pytest.LogCaptureFixture
) -> None:
    before = memory(world.alice, world)
    assert len(before["entries"]) == 3
    damaged = pool[1]
    token = flip_a_byte(Entry, damaged.id, "content")
    caplog.set_level(logging.WARNING)

    after = memory(world.alice, world)

    assert after == {
        "entries": [entry for entry in before["entries"] if entry["id"] != damaged.id],
        "version": before["version"],
    }
    # Filtered by tag, the same.
    tagged = memory(world.alice, world, f"?tags=from:{world.alice.person.id}")
    assert damaged.id not in {entry["id"] for entry in tagged["entries"]}
    assert len(tagged["entries"]) == 2
    # Bob's list never held it, and holds what it held.
    assert len(memory(world.bob, world)["entries"]) == 1
    assert_logged(caplog, "memory_entry", [damaged.id], "content")
    assert_no_content_or_token_logged(caplog, [token, stored_value(Entry, damaged.id, "content")])


def test_the_log_reads_no_payload_and_no_content(world: World, pool: list[Entry]) -> None:
    before = log(world.alice, world)
    flip_a_byte(Entry, pool[0].id, "content")
    for change_id in Change.objects.values_list("id", flat=True):
        flip_a_byte(Change, change_id, "payload")

    assert log(world.alice, world) == before
    assert len(memory(world.alice, world)["entries"]) == 2


def test_writes_still_work_around_a_damaged_entry(world: World, pool: list[Entry]) -> None:
    damaged = pool[0]
    flip_a_byte(Entry, damaged.id, "content")
    client = world.alice.client()
    url = f"/v1/bots/{world.bot.id}/memory"

    remembered = client.post(
        url,
        {"command": {"_tag": "Remember", "content": "Trains are late on Sundays"}},
        format="json",
    )
    assert remembered.status_code == 201, remembered.content
    assert remembered.json()["content"] == "Trains are late on Sundays"
    forgotten = client.post(url, {"command": {"_tag": "Forget", "id": damaged.id}}, format="json")
    assert forgotten.status_code == 200, forgotten.content
    purged = client.post(f"{url}/purge", {"tag": f"from:{world.bob.person.id}"}, format="json")
    assert purged.status_code == 200, purged.content

    contents = [entry["content"] for entry in memory(world.alice, world)["entries"]]
    assert sorted(contents) == sorted([*CONTENTS[1:], "Trains are late on Sundays"])


def test_context_and_learning_context_leave_the_entry_out(
    world: World, pool: list[Entry], caplog: pytest.LogCaptureFixture
) -> None:
    damaged = pool[2]
    flip_a_byte(Entry, damaged.id, "content")
    caplog.set_level(logging.WARNING)

    found = context(world.bot, reader(world, world.alice), limit=10_000)
    learned = learning_context(pool_id=world.bot.pool_bot_id, reader=reader(world, world.alice))

    kept = [entry.id for entry in pool if entry.id != damaged.id]
    assert sorted(found.entry_ids) == sorted(kept)
    assert found.contents == [
        Entry.objects.get(id=entry_id).content for entry_id in found.entry_ids
    ]
    assert found.text == "".join(f"- {content}\n" for content in found.contents)
    assert sorted(entry_id for entry_id, *_ in learned.entries) == sorted(kept)
    assert_logged(caplog, "memory_entry", [damaged.id], "content")
    assert_no_content_or_token_logged(caplog, [])


def test_a_dropped_key_empties_the_lists_but_takes_nothing_down(
    world: World, pool: list[Entry], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    before_log = log(world.alice, world)
    settings.OPENBOT_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    caplog.set_level(logging.WARNING)

    assert memory(world.alice, world)["entries"] == []
    assert log(world.alice, world) == before_log
    assert context(world.bot, reader(world, world.alice), limit=10_000).entry_ids == []
    assert_logged(caplog, "memory_entry", [entry.id for entry in pool], "content")

    new = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "Written under the new key"}},
        format="json",
    )
    assert new.status_code == 201, new.content
    assert [entry["content"] for entry in memory(world.alice, world)["entries"]] == [
        "Written under the new key"
    ]


def test_a_turns_enrichment_uses_the_other_entries(world: World, pool: list[Entry]) -> None:
    memory_model_set(world.org, OFFLINE_MODEL)
    bot_model_set(world.bot, OFFLINE_MODEL)
    damaged = pool[0]
    flip_a_byte(Entry, damaged.id, "content")
    chat_id = chat_open(world.alice, world.bot)

    take_turn(world.alice, chat_id, "When does the Basel train leave?")

    enrichment = Enrichment.objects.get()
    assert damaged.id not in enrichment.entry_ids
    assert sorted(enrichment.entry_ids) == sorted([pool[1].id, pool[2].id])
