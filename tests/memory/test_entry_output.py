"""[A13] `EntryOutput` writes an entry straight from its row (DRF's field walk is slow on long
lists): what it writes must be what its declared fields, and so the schema, say."""

from typing import Any

from memory.models import Entry
from memory.serializers import EntryOutput
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation, set_status


def test_every_kind_of_entry_is_what_the_declared_fields_say(world: World) -> None:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first, second = (
        ItemFactory.create(chat=chat, person=world.alice.person),
        ItemFactory.create(chat=chat, person=world.alice.person),
    )
    kept = fact([first, second], content="Tea, not coffee.", topics=["drinks"])
    gone = fact([second], content="The build is green.")
    observation([kept], audience=f"for:person:{world.alice.person.id}", confidence=0.5)
    set_status(gone, Entry.Status.INVALIDATED)
    pinned = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "call me Al", "tags": ["names"]}},
        format="json",
    )
    assert pinned.status_code == 201

    listed = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["entries"]
    bodies: list[dict[str, Any]] = [*listed, pinned.json()]

    assert {body["layer"] for body in bodies} == {"fact", "observation", "pinned"}
    assert any("invalidatedAt" in body for body in bodies)
    declared = EntryOutput().fields
    required = {name for name, field in declared.items() if field.required}
    for body in bodies:
        assert required <= set(body) <= set(declared), body
        # Read back through the declared fields: types, choices and the sources' shape hold.
        check = EntryOutput(data=body)
        assert check.is_valid(), check.errors
        for source in body["sources"]:
            assert set(source) in ({"chat", "item"}, {"entry"}), source
