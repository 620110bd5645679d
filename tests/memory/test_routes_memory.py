"""GET and POST /v1/bots/:botId/memory [A1, A2, E1, E4, E6, P1, V6]."""

from typing import Any

import pytest

from memory.models import Entry, EntryTag, Exclusion
from tests.conftest import Actor, World, error_fields
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation, set_status

# [E1, E4] Every entry shows exactly these fields; `invalidatedAt` and `confidence` only where
# they apply. Nothing private (evidence, exclusions) ever appears.
FIELDS = {
    "id",
    "layer",
    "content",
    "tags",
    "sources",
    "status",
    "createdAt",
    "updatedAt",
    "saidAt",
}


def url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory"


def read(actor: Actor, world: World, query: str = "") -> dict[str, Any]:
    response = actor.client().get(url(world) + query)
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    assert set(body) == {"entries", "version"}
    return body


def ids(actor: Actor, world: World, query: str = "") -> list[str]:
    return [entry["id"] for entry in read(actor, world, query)["entries"]]


def command(actor: Actor, world: World, body: dict[str, Any]) -> Any:
    return actor.client().post(url(world), {"command": body}, format="json")


def remember(actor: Actor, world: World, content: str = "call me Al", **extra: Any) -> str:
    response = command(actor, world, {"_tag": "Remember", "content": content, **extra})
    assert response.status_code == 201, response.json()
    entry_id: str = response.json()["id"]
    return entry_id


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The time services stamp on changes, set by the test."""
    now = [1_700_000_000_000]
    monkeypatch.setattr("memory.services.now_ms", lambda: now[0])
    return now


def test_entries_have_exactly_the_public_fields(world: World, clock: list[int]) -> None:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first, second = (
        ItemFactory.create(chat=chat, person=world.alice.person),
        ItemFactory.create(chat=chat, person=world.alice.person),
    )
    kept = fact(
        [first], content="Run the tests before you report that work is done.", topics=["testing"]
    )
    gone = fact([second], content="The build is green.")
    conclusion = observation(
        [kept], audience=f"for:person:{world.alice.person.id}", confidence=0.25
    )
    clock[0] += 1000
    set_status(gone, Entry.Status.INVALIDATED)

    entries = {entry["id"]: entry for entry in read(world.alice, world)["entries"]}

    assert entries[kept.id] == {
        "id": kept.id,
        "layer": "fact",
        "content": "Run the tests before you report that work is done.",
        "tags": [
            f"from:{world.alice.person.id}",
            f"for:person:{world.alice.person.id}",
            f"org:{world.org.id}",
            f"chat:{chat.id}",
            "testing",
        ],
        "sources": [{"chat": chat.id, "item": f"i-{first.seq}"}],
        "status": "active",
        "createdAt": 1_700_000_000_000,
        "updatedAt": 1_700_000_000_000,
        "saidAt": 1_700_000_000_000,
    }
    assert set(entries[conclusion.id]) == FIELDS | {"confidence"}
    assert entries[conclusion.id]["confidence"] == 0.25
    assert entries[conclusion.id]["sources"] == [{"entry": kept.id}]
    assert set(entries[gone.id]) == FIELDS | {"invalidatedAt"}
    assert entries[gone.id]["status"] == "invalidated"
    assert entries[gone.id]["invalidatedAt"] == entries[gone.id]["updatedAt"] == 1_700_000_001_000


def test_memory_order_is_pinned_then_newest_then_id(world: World, clock: list[int]) -> None:
    """[E6] Pinned first, then updatedAt descending, then id ascending."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    old = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    clock[0] += 10
    same_time = sorted(
        [
            fact([ItemFactory.create(chat=chat, person=world.alice.person)]).id,
            fact([ItemFactory.create(chat=chat, person=world.alice.person)]).id,
        ]
    )
    old_pin = remember(world.alice, world, "an older pin")
    clock[0] += 10
    new_pin = remember(world.alice, world, "a newer pin")
    clock[0] += 10
    newest = fact([ItemFactory.create(chat=chat, person=world.alice.person)])

    assert ids(world.alice, world) == [new_pin, old_pin, newest.id, *same_time, old.id]


def test_tags_keep_only_entries_with_all_of_them(world: World) -> None:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    both = fact(
        [ItemFactory.create(chat=chat, person=world.alice.person)],
        topics=["testing", "trip-planning"],
    )
    testing = fact([ItemFactory.create(chat=chat, person=world.alice.person)], topics=["testing"])
    fact([ItemFactory.create(chat=chat, person=world.alice.person)], topics=["trip-planning"])
    other_chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    elsewhere = fact(
        [ItemFactory.create(chat=other_chat, person=world.alice.person)], topics=["testing"]
    )

    assert set(ids(world.alice, world, "?tags=testing")) == {both.id, testing.id, elsewhere.id}
    assert ids(world.alice, world, "?tags=testing,trip-planning") == [both.id]
    assert ids(world.alice, world, "?tags=trip-planning, testing") == [both.id]
    assert set(ids(world.alice, world, f"?tags=testing,chat:{chat.id}")) == {both.id, testing.id}
    assert ids(world.alice, world, "?tags=nothing-like-it") == []
    # [X4] A tag filter never widens: bob has no entry for him.
    assert ids(world.bob, world, "?tags=testing") == []


def test_history_shows_invalidated_but_never_retracted(world: World) -> None:
    """[E5, V6] An invalidated entry stays in the history; a retracted one is gone."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    active = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    invalidated = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    retracted = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    set_status(invalidated, Entry.Status.INVALIDATED)
    set_status(retracted, Entry.Status.RETRACTED)

    statuses = {entry["id"]: entry["status"] for entry in read(world.alice, world)["entries"]}

    assert statuses == {active.id: "active", invalidated.id: "invalidated"}


def test_conclusions_of_an_invalidated_source_are_hidden(world: World) -> None:
    """[V6] An invalidated source hides every conclusion that depends on it."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    source = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    conclusion = observation([source], audience=f"for:person:{world.alice.person.id}")
    assert set(ids(world.alice, world)) == {source.id, conclusion.id}

    set_status(source, Entry.Status.INVALIDATED)

    assert ids(world.alice, world) == [source.id]


def test_version_counts_committed_changes(world: World) -> None:
    """[E7] The pool version starts at 0 and every change takes the next one."""
    assert read(world.alice, world)["version"] == 0
    remember(world.alice, world)
    remember(world.bob, world)
    # Everybody reads the same version, whatever they may see.
    assert read(world.alice, world)["version"] == read(world.bob, world)["version"] == 2


def test_remember_adds_a_pinned_entry_only_you_see(world: World, clock: list[int]) -> None:
    response = command(
        world.bob,
        world,
        {"_tag": "Remember", "content": "I prefer short answers.", "tags": ["style", "a1"]},
    )

    assert response.status_code == 201
    entry = response.json()
    bob = world.bob.person.id
    assert entry == {
        "id": entry["id"],
        "layer": "pinned",
        "content": "I prefer short answers.",
        "tags": [f"from:{bob}", f"for:person:{bob}", f"org:{world.org.id}", "style", "a1"],
        "sources": [],
        "status": "active",
        "createdAt": 1_700_000_000_000,
        "updatedAt": 1_700_000_000_000,
        "saidAt": 1_700_000_000_000,
    }
    assert entry["id"].startswith("mem_")
    assert read(world.bob, world)["entries"] == [entry]
    # [V2] Only its author: not the bot's writer, not the org admin, not the channel.
    assert ids(world.alice, world) == []
    assert ids(world.carol, world) == []


def test_remember_without_tags_has_only_openbot_tags(world: World) -> None:
    entry_id = remember(world.alice, world)
    alice = world.alice.person.id
    assert EntryTag.objects.filter(entry_id=entry_id).count() == 3
    assert read(world.alice, world)["entries"][0]["tags"] == [
        f"from:{alice}",
        f"for:person:{alice}",
        f"org:{world.org.id}",
    ]


@pytest.mark.parametrize(
    "tag",
    ["for:bot", "from:u_1", "org:o_1", "Bad", "a--b", "-a", "a-", "", "a b", "Ä", "x" * 65],
)
def test_remember_refuses_colon_tags_and_bad_topics(world: World, tag: str) -> None:
    """[E3, E9, A2] Only OpenBot writes colon tags; a topic is lowercase letters (of any
    script: tests/memory/test_topics.py), digits, hyphens."""
    response = command(world.alice, world, {"_tag": "Remember", "content": "x", "tags": [tag]})

    assert response.status_code == 400
    assert any(name.startswith("command.tags") for name in error_fields(response))
    assert not Entry.objects.exists()


def test_remember_keeps_when_it_was_said(world: World, clock: list[int]) -> None:
    """[R8] `saidAt` if given (a memory written down later), else the time it is stored."""
    given = remember(world.alice, world, "I adopted a puppy.", saidAt=1_600_000_000_000)
    now = remember(world.alice, world, "I like tea.")

    entries = {entry["id"]: entry for entry in read(world.alice, world)["entries"]}
    assert entries[given]["saidAt"] == 1_600_000_000_000
    assert entries[given]["createdAt"] == entries[now]["saidAt"] == 1_700_000_000_000


@pytest.mark.parametrize("said_at", [-1, "1600000000000", 1.5, None, 253_402_300_800_000])
def test_remember_refuses_a_bad_time_said(world: World, said_at: Any) -> None:
    response = command(world.alice, world, {"_tag": "Remember", "content": "x", "saidAt": said_at})
    assert response.status_code == 400
    assert "command.saidAt" in error_fields(response)
    assert not Entry.objects.exists()


def test_unknown_command_is_refused(world: World) -> None:
    response = command(world.alice, world, {"_tag": "Rewrite", "content": "x"})

    assert response.status_code == 400
    assert "command._tag" in error_fields(response)


def test_forget_retracts_when_you_are_the_only_person_behind_it(world: World) -> None:
    """[P1] Your own private fact goes to `retracted` and is gone from the view."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    mine = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    kept = fact([ItemFactory.create(chat=chat, person=world.alice.person)])

    response = command(world.alice, world, {"_tag": "Forget", "id": mine.id})

    assert response.status_code == 200
    assert Entry.objects.get(id=mine.id).status == Entry.Status.RETRACTED
    assert ids(world.alice, world) == [kept.id]


def test_forget_retracts_your_pinned_entry(world: World) -> None:
    entry_id = remember(world.bob, world)

    assert command(world.bob, world, {"_tag": "Forget", "id": entry_id}).status_code == 200

    assert Entry.objects.get(id=entry_id).status == Entry.Status.RETRACTED
    assert ids(world.bob, world) == []


def test_forget_invalidated_entry_retracts_it(world: World) -> None:
    """An invalidated entry is still yours in the history [V6]: you may take it back."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    old = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    set_status(old, Entry.Status.INVALIDATED)

    assert command(world.alice, world, {"_tag": "Forget", "id": old.id}).status_code == 200

    assert Entry.objects.get(id=old.id).status == Entry.Status.RETRACTED


def test_forget_a_group_fact_takes_back_only_your_part(world: World) -> None:
    """[P1] Alice leaves the entry; it stays for the channel, without her."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [
            ItemFactory.create(chat=chat, person=world.alice.person),
            ItemFactory.create(chat=chat, person=world.carol.person),
        ]
    )
    alice, carol = world.alice.person.id, world.carol.person.id

    response = command(world.alice, world, {"_tag": "Forget", "id": group.id})

    assert response.status_code == 200
    assert ids(world.alice, world) == []
    (entry,) = read(world.carol, world)["entries"]
    assert entry["id"] == group.id
    assert entry["status"] == "active"
    assert f"from:{alice}" not in entry["tags"]
    assert f"for:person:{alice}" not in entry["tags"]
    assert f"from:{carol}" in entry["tags"]
    assert f"for:channel:{world.channel.id}" in entry["tags"]
    # The exclusion is private: it is stored, never shown.
    assert Exclusion.objects.filter(entry_id=group.id, person_id=alice).exists()
    assert "exclusions" not in entry and "evidence" not in entry
    # Forgetting again: the entry is no longer for alice.
    assert command(world.alice, world, {"_tag": "Forget", "id": group.id}).status_code == 409

    # Now carol is the only person behind it: her Forget retracts it.
    assert command(world.carol, world, {"_tag": "Forget", "id": group.id}).status_code == 200
    assert Entry.objects.get(id=group.id).status == Entry.Status.RETRACTED
    assert ids(world.carol, world) == []


def test_forget_hides_conclusions_drawn_from_your_part(world: World) -> None:
    """[P1, V4](e) Once alice is excluded from a source, she loses what was concluded from it."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [
            ItemFactory.create(chat=chat, person=world.alice.person),
            ItemFactory.create(chat=chat, person=world.carol.person),
        ]
    )
    conclusion = observation([group], audience=f"for:channel:{world.channel.id}")

    command(world.alice, world, {"_tag": "Forget", "id": group.id})

    assert ids(world.alice, world) == []
    assert set(ids(world.carol, world)) == {group.id, conclusion.id}


def test_forget_by_a_channel_member_who_is_not_behind_it(world: World) -> None:
    """A channel member who said nothing is not among its people: only they lose it."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    assert ids(world.carol, world) == [group.id]

    assert command(world.carol, world, {"_tag": "Forget", "id": group.id}).status_code == 200

    assert ids(world.carol, world) == []
    assert ids(world.alice, world) == [group.id]
    assert Entry.objects.get(id=group.id).status == Entry.Status.ACTIVE


def test_forget_conflicts(world: World) -> None:
    """[P1] An id that is not for you — unknown, someone else's, already retracted — is a 409."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    alices = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    bobs_pin = remember(world.bob, world)
    retracted = remember(world.alice, world)
    command(world.alice, world, {"_tag": "Forget", "id": retracted})

    for entry_id in ["mem_unknown", bobs_pin, retracted]:
        response = command(world.alice, world, {"_tag": "Forget", "id": entry_id})
        assert response.status_code == 409, entry_id
        assert response.json()["error"]["code"] == "not_for_you"
    # Bob may not take back alice's fact either, and nothing changed.
    assert command(world.bob, world, {"_tag": "Forget", "id": alices.id}).status_code == 409
    assert Entry.objects.get(id=alices.id).status == Entry.Status.ACTIVE
    assert Entry.objects.get(id=bobs_pin).status == Entry.Status.ACTIVE
