"""GET /v1/bots/:botId/memory/log [A3, E7]."""

from typing import Any

import pytest

from memory.models import Change, Entry
from memory.services import ItemEvidence, entry_create_in, pool_change
from tests.conftest import Actor, World, error_fields
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, set_status


def log(actor: Actor, world: World, query: str = "") -> dict[str, Any]:
    response = actor.client().get(f"/v1/bots/{world.bot.id}/memory/log{query}")
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    assert set(body) == {"changes", "version"}
    for change in body["changes"]:
        assert set(change) == {"version", "at", "by", "ids"}
    return body


def remember(actor: Actor, world: World) -> str:
    response = actor.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "note"}},
        format="json",
    )
    entry_id: str = response.json()["id"]
    return entry_id


def test_log_lists_changes_of_entries_you_may_see(world: World) -> None:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    learned = fact(
        [ItemFactory.create(chat=chat, person=world.alice.person)]
    )  # version 1, by the memory bot
    pinned = remember(world.alice, world)  # version 2, by alice
    remember(world.bob, world)  # version 3: only bob's

    body = log(world.alice, world)

    assert body["version"] == 3
    assert [(c["version"], c["by"], c["ids"]) for c in body["changes"]] == [
        (1, "memory_bot", [learned.id]),
        (2, "person", [pinned]),
    ]
    assert all(isinstance(c["at"], int) and c["at"] > 1_600_000_000_000 for c in body["changes"])
    assert [c["version"] for c in log(world.bob, world)["changes"]] == [3]
    assert log(world.carol, world)["changes"] == []


def test_a_change_shows_only_the_ids_you_may_see(world: World) -> None:
    """One learning apply touching alice's and bob's entries shows each only their own."""
    alices_chat, bobs_chat = (
        ChatFactory.create(owner=world.alice, bot=world.bot),
        ChatFactory.create(owner=world.bob, bot=world.bot),
    )
    alices_item, bobs_item = (
        ItemFactory.create(chat=alices_chat, person=world.alice.person),
        ItemFactory.create(chat=bobs_chat, person=world.bob.person),
    )
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        created = [
            entry_create_in(
                change,
                layer=Entry.Layer.FACT,
                content="fact",
                tags=[
                    f"from:{actor.person.id}",
                    f"for:person:{actor.person.id}",
                    f"org:{world.org.id}",
                ],
                source_items=[(item.chat_id, item.seq)],
                evidence=[
                    ItemEvidence(
                        chat_id=item.chat_id,
                        item_seq=item.seq,
                        rule=f"person:{actor.person.id}",
                        organization_id=world.org.id,
                    )
                ],
            )
            for item, actor in [(alices_item, world.alice), (bobs_item, world.bob)]
        ]

    assert log(world.alice, world)["changes"][0]["ids"] == [created[0].id]
    assert log(world.bob, world)["changes"][0]["ids"] == [created[1].id]


def test_a_change_lists_its_ids_in_the_order_it_touched_them(world: World) -> None:
    """[E7] The log keeps the entries of a change in the order the change touched them (ids
    are random, so their sorted order is another)."""
    with pool_change(pool_id=world.bot.id, by=Change.By.PERSON) as change:
        touched = [
            entry_create_in(
                change,
                layer=Entry.Layer.PINNED,
                content=f"note {number}",
                tags=[f"for:person:{world.alice.person.id}", f"org:{world.org.id}"],
                evidence=[ItemEvidence("", 0, f"person:{world.alice.person.id}", world.org.id)],
            ).id
            for number in range(8)
        ]
    assert touched != sorted(touched)
    assert log(world.alice, world)["changes"] == [
        {"version": 1, "at": change.at, "by": "person", "ids": touched}
    ]


def test_since_keeps_only_later_changes(world: World) -> None:
    for _ in range(3):
        remember(world.alice, world)

    assert [c["version"] for c in log(world.alice, world, "?since=1")["changes"]] == [2, 3]
    assert log(world.alice, world, "?since=3")["changes"] == []
    assert log(world.alice, world, "?since=99") == {"changes": [], "version": 3}
    assert [c["version"] for c in log(world.alice, world, "?since=0")["changes"]] == [1, 2, 3]


def test_changes_of_entries_you_may_no_longer_see_are_left_out(world: World) -> None:
    """Access is checked now: after Forget retracts an entry its changes leave the log."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    learned = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    invalidated = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    set_status(invalidated, Entry.Status.INVALIDATED)
    world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Forget", "id": learned.id}},
        format="json",
    )

    body = log(world.alice, world)

    # [V6] The invalidated entry is still history; the retracted one is gone, with its changes.
    assert body["version"] == 4
    assert [(c["version"], c["ids"]) for c in body["changes"]] == [
        (2, [invalidated.id]),
        (3, [invalidated.id]),
    ]


def test_a_purge_is_left_out_of_the_log(world: World) -> None:
    """A purge touches no entry anyone may see; the version still moves [E7]."""
    pinned = remember(world.alice, world)
    purged = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge",
        {"tag": f"from:{world.bob.person.id}"},
        format="json",
    )
    assert purged.json() == {"removed": 0}

    assert log(world.alice, world) == {
        "changes": [log(world.alice, world)["changes"][0]],
        "version": 2,
    }
    assert log(world.alice, world)["changes"][0]["ids"] == [pinned]


@pytest.mark.parametrize("since", ["-1", "abc", "1.5", "", "1e3", "²", "0x10", "9" * 19, " 1"])
def test_bad_since_is_refused(world: World, since: str) -> None:
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory/log", {"since": since})

    assert response.status_code == 400
    assert "since" in error_fields(response)
