"""[C4, C5, A6, A8] The turn, confessions and enrichments routes: who may take a turn, who may
read what the bot confided and how inputs were rewritten (the chat's owner only), bad input,
and that a turn answers 201 and never 500.
"""

from typing import Any

import pytest
from rest_framework.test import APIClient

from chats.models import Item
from chats.services import MAX_TEXT
from memory.models import Change, Entry
from memory.services import entry_set_status_in, pool_change
from memorybot.models import Confession, Enrichment
from memorybot.purge import memory_purge
from openbot import services
from tests.conftest import World, error_fields
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact
from tests.memorybot.scenes import (
    FAKE_MODEL,
    OFFLINE_MODEL,
    bot_model_set,
    chat_open,
    confide_call,
    enrichment_answer,
    memory_model_set,
    take_turn,
)

WORDS = "Please book the train to Basel for Friday morning."
READS = ("confessions", "enrichments")


@pytest.fixture
def scene(world: World) -> World:
    """The offline memory bot and bot: every turn confides once and needs no server."""
    memory_model_set(world.org, OFFLINE_MODEL)
    bot_model_set(world.bot, OFFLINE_MODEL)
    return world


def post_turn(client: APIClient, chat_id: str, body: Any) -> Any:
    return client.post(f"/v1/chats/{chat_id}/turns", body, format="json")


# --- POST /v1/chats/:id/turns [C4] ----------------------------------------------------------


def test_a_turn_answers_201_with_the_turn_and_its_items(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    response = post_turn(scene.alice.client(), chat_id, {"text": WORDS})
    assert response.status_code == 201
    body = response.json()
    assert body["turn"]["chat"] == chat_id
    assert body["turn"]["person"] == scene.alice.person.id  # [C3] the stored turn person
    assert body["turn"]["endedAt"] >= body["turn"]["startedAt"]
    assert [(item["id"], item["kind"]) for item in body["items"]] == [
        ("i-1", "person"),
        ("i-2", "bot"),
    ]
    assert body["items"][0]["text"] == WORDS
    again = take_turn(scene.alice, chat_id, "And back on Sunday.")
    assert [item["id"] for item in again["items"]] == ["i-3", "i-4"]


def test_a_turn_needs_a_token(scene: World, anon: APIClient) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    assert post_turn(anon, chat_id, {"text": WORDS}).status_code == 401


@pytest.mark.parametrize("name", ["bob", "carol", "dave"])
def test_only_the_owner_takes_turns_in_a_private_chat(scene: World, name: str) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    response = post_turn(scene.actor(name).client(), chat_id, {"text": WORDS})
    assert response.status_code == 404
    assert response.json()["error"]["code"]


def test_channel_members_take_turns_in_a_group_chat(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    body = take_turn(scene.carol, chat_id, WORDS)
    assert body["turn"]["person"] == scene.carol.person.id
    assert post_turn(scene.bob.client(), chat_id, {"text": WORDS}).status_code == 404
    assert post_turn(scene.dave.client(), chat_id, {"text": WORDS}).status_code == 404
    # [H5] Membership counts as of the moment of the turn.
    services.channel_member_remove(channel=scene.channel, person=scene.carol.person)
    assert post_turn(scene.carol.client(), chat_id, {"text": WORDS}).status_code == 404


def test_a_participant_whose_grant_was_revoked_gets_404(scene: World) -> None:
    """[C4] Taking a turn needs read on the bot as well as a place in the chat: carol, still
    in the channel, loses read with the organization's grant and the chat with it."""
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    take_turn(scene.carol, chat_id, WORDS)
    items = Item.objects.filter(chat_id=chat_id).count()

    services.grant_revoke(bot=scene.bot, organization=scene.org)
    response = post_turn(scene.carol.client(), chat_id, {"text": WORDS})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert Item.objects.filter(chat_id=chat_id).count() == items
    take_turn(scene.alice, chat_id, WORDS)  # alice's own grant stays


def test_an_unknown_chat_is_404(scene: World) -> None:
    response = post_turn(scene.alice.client(), "chat_00000000000000000000", {"text": WORDS})
    assert response.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="missing"),
        pytest.param({"text": None}, id="null"),
        pytest.param({"text": 42}, id="number"),
        pytest.param({"text": ["a"]}, id="list"),
        pytest.param({"text": ""}, id="empty"),
        pytest.param({"text": "x" * (MAX_TEXT + 1)}, id="too-long"),
    ],
)
def test_bad_input_is_400_naming_the_field(scene: World, body: dict[str, Any]) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    response = post_turn(scene.alice.client(), chat_id, body)
    assert response.status_code == 400
    assert "text" in error_fields(response)


def test_an_unknown_field_is_400(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    response = post_turn(scene.alice.client(), chat_id, {"text": WORDS, "author": "u_x"})
    assert response.status_code == 400
    assert "author" in error_fields(response)


def test_a_body_that_is_not_json_is_400(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    response = scene.alice.client().post(
        f"/v1/chats/{chat_id}/turns", "{not json", content_type="application/json"
    )
    assert response.status_code == 400


def test_a_turn_never_answers_500_when_every_model_fails(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    EntryFactory.create(
        author=world.alice, bot=world.bot, content="Alice travels first class to Basel."
    )
    fake_openai.default.status = 500
    chat_id = chat_open(world.alice, world.bot)
    response = post_turn(world.alice.client(), chat_id, {"text": WORDS})
    assert response.status_code == 201
    assert response.json()["items"][0]["text"] == WORDS


# --- GET confessions and enrichments: read on the chat is the owner's [C5, A6] -------------


@pytest.fixture
def group_chat(world: World, fake_openai: FakeOpenAI) -> str:
    """Alice's group chat where carol took two turns: in the first the bot confided, the
    second was enriched with what the group said in the first."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    chat_id = chat_open(world.alice, world.bot, channel=world.channel.id)
    fake_openai.reply(**confide_call("I am unsure which day they mean."))
    fake_openai.reply(content="I hear you.")
    fake_openai.reply(content="Saturday it is.")
    take_turn(world.carol, chat_id, "We hike on Saturdays.")
    said = fact([Item.objects.get(chat_id=chat_id, seq=1)], content="The group hikes on Saturdays.")
    fake_openai.reply(content=enrichment_answer(f"{WORDS} We hike on Saturdays.", [said.id]))
    take_turn(world.carol, chat_id, WORDS)
    assert Confession.objects.filter(chat_id=chat_id).count() == 1
    assert Enrichment.objects.filter(chat_id=chat_id).count() == 1
    return chat_id


@pytest.mark.parametrize("route", READS)
def test_the_owner_reads_confessions_and_enrichments(
    world: World, group_chat: str, route: str
) -> None:
    response = world.alice.client().get(f"/v1/chats/{group_chat}/{route}")
    assert response.status_code == 200
    [listed] = response.json()[route]
    assert listed["turn"]


@pytest.mark.parametrize("route", READS)
@pytest.mark.parametrize("name", ["carol", "bob", "dave"])
def test_nobody_but_the_owner_reads_them(
    world: World, group_chat: str, route: str, name: str
) -> None:
    response = world.actor(name).client().get(f"/v1/chats/{group_chat}/{route}")
    assert response.status_code == 404
    assert response.json()["error"]["code"]


@pytest.mark.parametrize("route", READS)
def test_reading_them_needs_a_token(
    world: World, group_chat: str, route: str, anon: APIClient
) -> None:
    assert anon.get(f"/v1/chats/{group_chat}/{route}").status_code == 401


@pytest.mark.parametrize("route", READS)
def test_a_chat_lists_only_its_own(world: World, group_chat: str, route: str) -> None:
    other_chat = chat_open(world.alice, world.bot)
    response = world.alice.client().get(f"/v1/chats/{other_chat}/{route}")
    assert response.status_code == 200
    assert response.json() == {route: []}
    assert Confession.objects.exists() and Enrichment.objects.exists()


@pytest.mark.parametrize("route", READS)
def test_an_unknown_chat_lists_nothing_but_404(world: World, route: str) -> None:
    response = world.alice.client().get(f"/v1/chats/chat_00000000000000000000/{route}")
    assert response.status_code == 404


def no_longer_usable(world: World, chat_id: str, way: str) -> None:
    """The entry alice's group chat's enrichment was made from stops being one she may use."""
    [enrichment] = Enrichment.objects.filter(chat_id=chat_id)
    [entry_id] = enrichment.entry_ids
    pool_id = world.bot.pool_bot_id
    if way == "left the channel":
        services.channel_member_remove(channel=world.channel, person=world.alice.person)
    elif way == "Forget":
        response = world.alice.client().post(
            f"/v1/bots/{world.bot.id}/memory",
            {"command": {"_tag": "Forget", "id": entry_id}},
            format="json",
        )
        assert response.status_code == 200
    elif way == "invalidated":
        with pool_change(pool_id=pool_id, by=Change.By.MEMORY_BOT) as change:
            entry_set_status_in(change, entry_id=entry_id, status=Entry.Status.INVALIDATED)
    else:
        memory_purge(pool_id=pool_id, tag=f"chat:{chat_id}")


def test_an_enrichment_lists_the_entries_it_was_made_from(world: World, group_chat: str) -> None:
    [listed] = world.alice.client().get(f"/v1/chats/{group_chat}/enrichments").json()["enrichments"]
    [enrichment] = Enrichment.objects.filter(chat_id=group_chat)
    assert listed["text"] == f"{WORDS} We hike on Saturdays."
    assert listed["withheld"] is False
    assert listed["original"] == WORDS
    assert listed["entries"] == enrichment.entry_ids


@pytest.mark.parametrize("way", ["left the channel", "Forget", "invalidated", "purged"])
def test_an_enrichment_made_from_an_entry_the_owner_may_no_longer_use_withholds_its_text(
    world: World, group_chat: str, way: str
) -> None:
    """[N6] The check at read time: the rewrite's text would still show that memory."""
    no_longer_usable(world, group_chat, way)
    response = world.alice.client().get(f"/v1/chats/{group_chat}/enrichments")
    assert response.status_code == 200
    if way == "purged":  # [P4] the purge deleted the enrichment itself
        assert response.json() == {"enrichments": []}
        return
    [listed] = response.json()["enrichments"]
    assert listed["text"] is None and listed["withheld"] is True
    assert listed["original"] == WORDS
    assert listed["entries"] == []
    assert "Saturday" not in response.content.decode()


def test_the_routes_are_in_the_schema(world: World, anon: APIClient) -> None:
    paths = anon.get("/v1/schema", HTTP_ACCEPT="application/json").json()["paths"]
    for route in ("turns", *READS):
        assert f"/v1/chats/{{chat_id}}/{route}" in paths


# --- DELETE /v1/chats/:id/items [C4, P3] ----------------------------------------------------


def test_deleting_the_history_removes_its_words_but_keeps_what_was_learned(
    scene: World,
) -> None:
    """The owner's DELETE removes the items and the confessions and enrichments that repeat
    the chat's words (an enrichment holds the person's original); memory stays [P3]."""
    client = scene.alice.client()
    chat_id = chat_open(scene.alice, scene.bot)
    EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Basel trains leave from track 7"
    )
    take_turn(scene.alice, chat_id, WORDS)
    assert Confession.objects.filter(chat_id=chat_id).exists()
    assert Enrichment.objects.filter(chat_id=chat_id).exists()
    memory_before = client.get(f"/v1/bots/{scene.bot.id}/memory").json()["entries"]

    assert client.delete(f"/v1/chats/{chat_id}/items").status_code == 204

    assert client.get(f"/v1/chats/{chat_id}/items").json() == {"items": []}
    for route in READS:
        assert client.get(f"/v1/chats/{chat_id}/{route}").json() == {route: []}
    assert client.get(f"/v1/bots/{scene.bot.id}/memory").json()["entries"] == memory_before
