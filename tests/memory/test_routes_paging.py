"""Paging of GET memory and memory/log [A10] and one entry by id [A11]."""

from typing import Any

import pytest

from memory.models import Entry
from memory.services import ImportedEntry, ItemEvidence, entries_import, entry_remember
from openbot import ids, services
from tests.conftest import Actor, World, error_fields
from tests.memory.builders import set_status


def url(world: World, path: str = "") -> str:
    return f"/v1/bots/{world.bot.id}/memory{path}"


def get(actor: Actor, path: str) -> dict[str, Any]:
    response = actor.client().get(path)
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    return body


def remember(world: World, actor: Actor, content: str, topics: list[str]) -> Entry:
    return entry_remember(
        pool_id=world.bot.id,
        person_id=actor.person.id,
        organization_id=world.org.id,
        content=content,
        topics=topics,
    )


def pinned_note(actor: Actor, n: int) -> ImportedEntry:
    """A note of `actor`'s as an older version stored it, with provable access. Many share
    an `updatedAt`, so pages must break ties by id as memory order does [E6]."""
    person, org = actor.person.id, actor.organization.id
    pinned = n % 10 == 0
    chat, seq = ("", 0) if pinned else ("chat_old", n)
    return ImportedEntry(
        id=ids.new_id("mem"),
        layer=Entry.Layer.PINNED if pinned else Entry.Layer.FACT,
        content=f"note {n}",
        tags=[f"from:{person}", f"for:person:{person}", f"org:{org}", f"t{n % 3}"],
        source_items=[] if pinned else [(chat, seq)],
        evidence=[
            ItemEvidence(chat_id=chat, item_seq=seq, rule=f"person:{person}", organization_id=org)
        ],
        updated_at=1_700_000_000_000 + n % 7,
    )


def pages(actor: Actor, first: str, key: str) -> tuple[list[Any], int]:
    """Everything a client reads by following `nextCursor` from `first`, and the page count."""
    items: list[Any] = []
    path, count = first, 0
    while True:
        body = get(actor, path)
        count += 1
        assert set(body) == {key, "version", "nextCursor"}
        items += body[key]
        if body["nextCursor"] is None:
            return items, count
        separator = "&" if "?" in first else "?"
        path = f"{first}{separator}cursor={body['nextCursor']}"


def test_a_large_pool_read_in_pages_equals_the_whole_list(world: World) -> None:
    entries_import(
        pool_id=world.bot.id,
        entries=[pinned_note(world.alice, n) for n in range(2_500)]
        + [pinned_note(world.bob, n) for n in range(50)],
    )
    whole = get(world.alice, url(world))["entries"]
    assert len(whole) == 2_500

    paged, count = pages(world.alice, url(world, "?limit=1000"), "entries")

    assert count == 3
    assert paged == whole
    tagged, _ = pages(world.alice, url(world, "?tags=t1&limit=300"), "entries")
    assert tagged == get(world.alice, url(world, "?tags=t1"))["entries"]


def test_a_page_that_ends_the_list_has_no_cursor(world: World) -> None:
    for n in range(3):
        remember(world, world.alice, f"note {n}", [])
    assert get(world.alice, url(world, "?limit=3"))["nextCursor"] is None
    first = get(world.alice, url(world, "?limit=2"))
    assert len(first["entries"]) == 2 and first["nextCursor"]
    rest = get(world.alice, url(world, f"?limit=2&cursor={first['nextCursor']}"))
    assert len(rest["entries"]) == 1 and rest["nextCursor"] is None


def test_the_log_read_in_pages_equals_the_whole_log(world: World) -> None:
    for n in range(9):
        actor = world.alice if n % 3 else world.bob  # bob's changes are left out for alice
        remember(world, actor, f"note {n}", [])
    whole = get(world.alice, url(world, "/log?since=1"))["changes"]
    assert len(whole) == 6

    for limit in (1, 2, 4, 8, 1000):
        paged, count = pages(world.alice, url(world, f"/log?since=1&limit={limit}"), "changes")
        assert paged == whole
        assert count == max(1, -(-8 // limit))  # a page covers `limit` changes of the log


@pytest.fixture
def cursors(world: World) -> dict[str, str]:
    for actor in (world.alice, world.bob):
        for n in range(2):
            remember(world, actor, f"note {n}", [])
    return {
        "alice": get(world.alice, url(world, "?limit=1"))["nextCursor"],
        "bob": get(world.bob, url(world, "?limit=1"))["nextCursor"],
        "alice log": get(world.alice, url(world, "/log?limit=1"))["nextCursor"],
    }


def test_a_cursor_of_another_reader_bot_or_list_is_refused(
    world: World, cursors: dict[str, str]
) -> None:
    second = services.bot_create(organization=world.org, name="second")
    services.grant_set(bot=second, level="read", organization=world.org)
    alice = world.alice.client()
    refused = [
        alice.get(url(world, f"?limit=1&cursor={cursors['bob']}")),
        alice.get(f"/v1/bots/{second.id}/memory?limit=1&cursor={cursors['alice']}"),
        alice.get(url(world, f"/log?limit=1&cursor={cursors['alice']}")),
        alice.get(url(world, f"?limit=1&cursor={cursors['alice log']}")),
        alice.get(url(world, "?limit=1&cursor=not-a-cursor")),
        alice.get(url(world, f"?limit=1&cursor={cursors['alice'][:-2]}")),
        alice.get(url(world, "/log?limit=1&cursor=")),
        alice.get(url(world, "?limit=1&cursor=ü:ü:ü")),
        alice.get(url(world, f"?limit=1&cursor={'x:' * 5_000}")),
    ]
    for response in refused:
        assert response.status_code == 400, response.json()
        assert set(error_fields(response)) == {"cursor"}
    assert alice.get(url(world, f"?limit=1&cursor={cursors['alice']}")).status_code == 200


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "1.5", "abc", "", "²", "10" * 10])
@pytest.mark.parametrize("path", ["", "/log"])
def test_a_bad_limit_is_a_400_naming_it(world: World, path: str, limit: str) -> None:
    response = world.alice.client().get(url(world, f"{path}?limit={limit}"))
    assert response.status_code == 400
    assert set(error_fields(response)) == {"limit"}


def test_one_entry_is_the_list_element(world: World) -> None:
    mine = remember(world, world.alice, "call me Al", ["names"])
    [listed] = get(world.alice, url(world))["entries"]

    assert get(world.alice, url(world, f"/{mine.id}")) == listed
    set_status(mine, Entry.Status.INVALIDATED)  # the history is shown [V6]
    [listed] = get(world.alice, url(world))["entries"]
    assert get(world.alice, url(world, f"/{mine.id}")) == listed


@pytest.mark.parametrize(
    ("who", "status"),
    [("alice", 200), ("bob", 404), ("carol", 404), ("dave", 404), ("anonymous", 401)],
)
def test_one_entry_is_a_404_for_anyone_it_is_not_for(world: World, who: str, status: int) -> None:
    """[A11] Never a 403: whether an entry exists is not revealed."""
    mine = remember(world, world.alice, "call me Al", [])
    client = world.actor(who).client() if who != "anonymous" else world.alice.client()
    if who == "anonymous":
        client.credentials()
    response = client.get(url(world, f"/{mine.id}"))
    assert response.status_code == status
    if status != 200:
        assert set(response.json()) == {"error"}
        assert "call me Al" not in response.content.decode()


def test_an_unknown_or_taken_back_entry_is_a_404(world: World) -> None:
    mine = remember(world, world.alice, "call me Al", [])
    alice = world.alice.client()
    assert alice.get(url(world, "/mem_unknown")).status_code == 404
    forget = alice.post(url(world), {"command": {"_tag": "Forget", "id": mine.id}}, format="json")
    assert forget.status_code == 200
    response = alice.get(url(world, f"/{mine.id}"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
