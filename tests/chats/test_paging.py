"""[A16] Every list of a chat pages like memory and the log ([A10]): `limit` and `cursor` in,
`nextCursor` out; without `limit` the answer is as it was, every row and no `nextCursor`."""

from typing import Any

import pytest
from django.core import signing

from tests.conftest import Actor, World, error_fields
from tests.memorybot.scenes import take_turn
from tests.openbot.damage import chat_filling_every_encrypted_column

# Each list of a chat and the key its rows are under.
LISTS = {"items": "items", "confessions": "confessions", "enrichments": "enrichments"}
LISTS["learning"] = "runs"


@pytest.fixture
def chat_id(world: World) -> str:
    """Three turns of alice's: every list holds two rows or more."""
    chat_id = chat_filling_every_encrypted_column(world)
    take_turn(world.alice, chat_id, "When does the Basel train arrive?")
    return chat_id


def get(actor: Actor, chat_id: str, name: str, **query: Any) -> Any:
    return actor.client().get(f"/v1/chats/{chat_id}/{name}", query)


@pytest.mark.parametrize("name", LISTS)
def test_a_list_read_page_by_page_is_the_list(world: World, chat_id: str, name: str) -> None:
    key = LISTS[name]
    whole = get(world.alice, chat_id, name).json()
    assert set(whole) == {key}, "without limit: as before, no nextCursor"
    assert len(whole[key]) >= 2

    for limit in (1, 2):
        pages, query = [], {"limit": limit}
        while True:
            body = get(world.alice, chat_id, name, **query).json()
            assert set(body) == {key, "nextCursor"}, body
            assert 1 <= len(body[key]) <= limit
            pages += body[key]
            if body["nextCursor"] is None:
                break
            query = {"limit": limit, "cursor": body["nextCursor"]}
        assert pages == whole[key], (name, limit)

    everything = get(world.alice, chat_id, name, limit=1000).json()
    assert everything == {key: whole[key], "nextCursor": None}


@pytest.mark.parametrize("name", LISTS)
def test_a_cursor_opens_only_its_own_list_for_its_reader(
    world: World, chat_id: str, name: str
) -> None:
    cursor = get(world.alice, chat_id, name, limit=1).json()["nextCursor"]
    other = next(other for other in LISTS if other != name)
    # The same list of another chat of alice's.
    elsewhere = chat_filling_every_encrypted_column(world)
    other_chat = get(world.alice, elsewhere, name, limit=1).json()["nextCursor"]
    for url_name, bad in (
        (other, cursor),
        (name, other_chat),
        (name, "not-a-cursor"),
        (name, cursor + "x"),
    ):
        response = get(world.alice, chat_id, url_name, limit=1, cursor=bad)
        assert response.status_code == 400
        assert set(error_fields(response)) == {"cursor"}


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "a", "1.5", "²"])
def test_a_bad_limit_is_400_naming_it(world: World, chat_id: str, limit: str) -> None:
    for name in LISTS:
        response = get(world.alice, chat_id, name, limit=limit)
        assert response.status_code == 400
        assert set(error_fields(response)) == {"limit"}


@pytest.mark.parametrize("position", [["garbage"], [None], ["x", 1], [1, 2], "5", [{"a": 1}]])
def test_a_signed_cursor_of_another_shape_is_400_naming_it(
    world: World, chat_id: str, position: Any
) -> None:
    """A cursor signed for this list that no longer fits it (an older server's, say)."""
    caller = world.alice
    salt = f"chats.runs.cursor:{chat_id}:{caller.organization.id}:{caller.person.id}"
    cursor = signing.dumps(position, salt=salt)
    response = get(world.alice, chat_id, "learning", limit=1, cursor=cursor)
    assert response.status_code == 400
    assert set(error_fields(response)) == {"cursor"}
