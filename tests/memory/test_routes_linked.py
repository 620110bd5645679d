"""Memory through a linked bot [H4]: the source bot's pool, read in the linked organization."""

from dataclasses import dataclass
from typing import Any

import pytest

from memory.models import Entry, EntryTag
from openbot import services
from openbot.models import Bot
from tests.conftest import Actor, World, make_actor
from tests.memory.builders import chat_for, fact, say


@dataclass
class Linked:
    bot: Bot  # world.bot shared into dave's organization
    carol_b: Actor  # carol, also a member of dave's organization, with a token there


@pytest.fixture
def linked(world: World) -> Linked:
    bot = services.bot_link(bot=world.bot, organization=world.other_org)
    services.grant_set(bot=bot, level="read", organization=world.other_org)
    services.grant_set(bot=bot, level="write", person=world.dave.person)
    services.membership_add(organization=world.other_org, person=world.carol.person)
    token = services.token_create(person=world.carol.person, organization=world.other_org)
    return Linked(bot=bot, carol_b=Actor(world.carol.person, world.other_org, token))


def entry_ids(actor: Actor, bot: Bot) -> list[str]:
    response = actor.client().get(f"/v1/bots/{bot.id}/memory")
    assert response.status_code == 200, response.json()
    return [entry["id"] for entry in response.json()["entries"]]


def test_learning_through_a_linked_bot_goes_to_the_source_pool(
    world: World, linked: Linked
) -> None:
    daves = fact([say(chat_for(world.dave, linked.bot), world.dave)])

    assert daves.bot_id == world.bot.id
    assert EntryTag.objects.filter(entry=daves, tag=f"org:{world.other_org.id}").exists()
    assert entry_ids(world.dave, linked.bot) == [daves.id]
    assert entry_ids(world.alice, world.bot) == []


def test_entries_of_one_organization_are_seen_only_there(world: World, linked: Linked) -> None:
    """[V4](b) carol in both organizations sees each organization's entries only there."""
    in_a = fact([say(chat_for(world.carol, world.bot), world.carol)])
    in_b = fact([say(chat_for(linked.carol_b, linked.bot), linked.carol_b)])

    assert entry_ids(world.carol, world.bot) == [in_a.id]
    assert entry_ids(linked.carol_b, linked.bot) == [in_b.id]
    # dave reads the same pool in the same organization, but neither entry is for him.
    assert entry_ids(world.dave, linked.bot) == []


def test_remember_through_a_linked_bot(world: World, linked: Linked) -> None:
    response = world.dave.client().post(
        f"/v1/bots/{linked.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "I work in Org B."}},
        format="json",
    )

    assert response.status_code == 201
    entry = response.json()
    assert f"org:{world.other_org.id}" in entry["tags"]
    assert Entry.objects.get(id=entry["id"]).bot_id == world.bot.id
    assert entry_ids(world.dave, linked.bot) == [entry["id"]]
    assert entry_ids(world.alice, world.bot) == []
    forget = world.dave.client().post(
        f"/v1/bots/{linked.bot.id}/memory",
        {"command": {"_tag": "Forget", "id": entry["id"]}},
        format="json",
    )
    assert forget.status_code == 200
    assert entry_ids(world.dave, linked.bot) == []


def test_the_log_through_a_linked_bot_is_the_pools_log(world: World, linked: Linked) -> None:
    fact([say(chat_for(world.alice, world.bot), world.alice)])
    daves = fact([say(chat_for(world.dave, linked.bot), world.dave)])

    body = world.dave.client().get(f"/v1/bots/{linked.bot.id}/memory/log").json()

    assert body == {
        "changes": [
            {"version": 2, "at": body["changes"][0]["at"], "by": "memory_bot", "ids": [daves.id]}
        ],
        "version": 2,
    }


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/purge", {"tag": "from:u_1"}),
        ("get", "/bot", None),
        ("patch", "/bot", {"expected": 0, "instructions": "share it all"}),
    ],
)
def test_settings_and_purge_need_the_bot_that_is_not_linked(
    world: World, linked: Linked, method: str, path: str, body: Any
) -> None:
    """[H4, A4, A5] write on a linked bot never counts: 403, and nothing changes."""
    daves = fact([say(chat_for(world.dave, linked.bot), world.dave)])
    client = world.dave.client()

    response = getattr(client, method)(
        f"/v1/bots/{linked.bot.id}/memory{path}", body, format="json"
    )

    assert response.status_code == 403
    assert Entry.objects.filter(id=daves.id).exists()
    assert world.alice.client().get(f"/v1/bots/{world.bot.id}/memory/bot").json()["version"] == 0
    # The source bot is another organization's: a 404 for dave.
    direct = getattr(client, method)(f"/v1/bots/{world.bot.id}/memory{path}", body, format="json")
    assert direct.status_code == 404


def test_the_source_bots_writer_purges_across_organizations(world: World, linked: Linked) -> None:
    """[A4] The pool is one: purging `org:` of the linked organization removes its entries."""
    daves = fact([say(chat_for(world.dave, linked.bot), world.dave)])
    alices = fact([say(chat_for(world.alice, world.bot), world.alice)])

    response = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge",
        {"tag": f"org:{world.other_org.id}"},
        format="json",
    )

    assert response.json() == {"removed": 1}
    assert not Entry.objects.filter(id=daves.id).exists()
    assert entry_ids(world.alice, world.bot) == [alices.id]


def test_a_linked_bot_without_a_grant_is_not_found(world: World, linked: Linked) -> None:
    erin = make_actor(world.other_org, "erin")
    assert entry_ids(erin, linked.bot) == []  # read through her organization's grant
    unshared = services.bot_link(
        bot=services.bot_create(organization=world.org, name="private"),
        organization=world.other_org,
    )

    assert erin.client().get(f"/v1/bots/{unshared.id}/memory").status_code == 404
