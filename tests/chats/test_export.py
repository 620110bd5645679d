"""[D1] `GET /v1/me/export` and `manage.py person_export`: everything about the token's person
in the token's organization, streamed as one JSON document — for each bot they may read
exactly the entries GET memory lists them ([X4]: never more), their own chats with items,
enrichments and learning runs, their tokens without a secret."""

import io
import json
import tracemalloc
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from chats.models import Chat
from conversations.export import person_export
from memory.models import Entry
from memory.services import ImportedEntry, ItemEvidence, entries_import
from openbot.models import Token
from tests.conftest import World
from tests.factories import Actor, ChatFactory, EntryFactory, ItemFactory
from tests.memory.builders import fact


def export_of(actor: Actor) -> dict[str, Any]:
    response = actor.client().get("/v1/me/export")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith("attachment;")
    assert isinstance(response, StreamingHttpResponse)
    document: dict[str, Any] = json.loads(b"".join(response.streaming_content))
    return document


def listed(actor: Actor, bot_id: str) -> list[dict[str, Any]]:
    """Every entry GET memory lists `actor`, page by page."""
    entries, url = [], f"/v1/bots/{bot_id}/memory?limit=2"
    while url:
        body = actor.client().get(url).json()
        entries += body["entries"]
        cursor = body["nextCursor"]
        url = cursor and f"/v1/bots/{bot_id}/memory?limit=2&cursor={cursor}"
    return entries


@pytest.fixture
def memories(world: World) -> World:
    """alice's pinned entry, bob's pinned entry, a fact of alice's channel group chat (carol
    said it) and a fact of bob's private chat; a private chat of alice's with one turn."""
    EntryFactory.create(author=world.alice, bot=world.bot, content="alice's own note")
    EntryFactory.create(author=world.bob, bot=world.bot, content="bob's own note")
    group = ChatFactory.create(owner=world.carol, bot=world.bot, channel=world.channel)
    fact([ItemFactory.create(chat=group, person=world.carol.person)], content="the team hikes")
    bobs = ChatFactory.create(owner=world.bob, bot=world.bot)
    fact([ItemFactory.create(chat=bobs, person=world.bob.person)], content="bob's secret")
    mine = ChatFactory.create(owner=world.alice, bot=world.bot)
    ItemFactory.create(chat=mine, person=world.alice.person, text="my words")
    return world


@pytest.mark.parametrize("name", ["alice", "bob", "carol"])
def test_the_export_holds_what_get_memory_lists_and_no_more(memories: World, name: str) -> None:
    actor = memories.actor(name)
    document = export_of(actor)

    assert document["format"] == 1
    assert document["person"]["id"] == actor.person.id
    assert document["organization"]["id"] == memories.org.id
    [memory] = document["memory"]
    assert memory["bot"]["id"] == memories.bot.id
    assert memory["entries"] == listed(actor, memories.bot.id)
    assert (
        memory["version"]
        == actor.client().get(f"/v1/bots/{memories.bot.id}/memory").json()["version"]
    )
    # Their own chats, and only theirs.
    owned = set(Chat.objects.filter(owner=actor.person).values_list("id", flat=True))
    assert {chat["id"] for chat in document["chats"]} == owned


def test_an_export_shows_nobody_elses_words(memories: World) -> None:
    text = json.dumps(export_of(memories.alice))
    assert "alice's own note" in text and "the team hikes" in text and "my words" in text
    assert "bob's" not in text
    [chat] = json.loads(text)["chats"]
    assert [item["text"] for item in chat["items"]] == ["my words"]
    assert chat["enrichments"] == [] and chat["learningRuns"] == []


def test_an_outsider_exports_nothing_of_the_organization(memories: World) -> None:
    document = export_of(memories.dave)
    assert document["organization"]["id"] == memories.other_org.id
    assert [memory["bot"]["id"] for memory in document["memory"]] == [memories.other_bot.id]
    assert "alice" not in json.dumps(document)


def test_tokens_are_listed_without_their_secret(world: World) -> None:
    document = export_of(world.alice)
    tokens = Token.objects.filter(person=world.alice.person)
    assert [token["id"] for token in document["tokens"]] == [token.pk for token in tokens]
    text = json.dumps(document)
    for token in tokens:
        assert token.key_hash not in text
    assert set(document["tokens"][0]) == {"id", "createdAt", "expiresAt", "lastUsedAt"}


def test_the_export_needs_a_token(anon: APIClient) -> None:
    assert anon.get("/v1/me/export").status_code == 401


def test_the_command_writes_the_same_document(memories: World) -> None:
    answered = export_of(memories.alice)  # first: the request notes the token's use
    out = io.StringIO()
    call_command(
        "person_export", "--org", memories.org.id, "--person", memories.alice.person.id, stdout=out
    )
    written = json.loads(out.getvalue())
    assert {**written, "exportedAt": 0} == {**answered, "exportedAt": 0}


def test_the_command_refuses_a_person_of_another_organization(world: World) -> None:
    with pytest.raises(CommandError, match="--person"):
        call_command("person_export", "--org", world.org.id, "--person", world.dave.person.id)


def peak_of_export(world: World) -> int:
    """The most memory held while the export of alice is read through."""
    tracemalloc.start()
    try:
        for _ in person_export(person=world.alice.person, organization=world.org):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_export_streams(world: World) -> None:
    """Memory stays flat in the size of the export: 10,000 entries need no more than 1,000."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    said = ItemFactory.create(chat=chat, person=world.alice.person)
    alice, org = world.alice.person.id, world.org.id

    def notes(start: int, count: int) -> list[ImportedEntry]:
        return [
            ImportedEntry(
                id=f"mem_export{n}",
                layer=Entry.Layer.FACT,
                content=f"what alice said, note {n} " + "x" * 200,
                tags=[f"org:{org}", f"for:person:{alice}", f"from:{alice}", f"chat:{chat.id}"],
                source_items=[(chat.id, said.seq)],
                evidence=[ItemEvidence(chat.id, said.seq, f"person:{alice}", org)],
            )
            for n in range(start, start + count)
        ]

    entries_import(pool_id=world.bot.id, entries=notes(0, 1_000))
    small = peak_of_export(world)
    entries_import(pool_id=world.bot.id, entries=notes(1_000, 9_000))
    large = peak_of_export(world)
    document = json.loads("".join(person_export(person=world.alice.person, organization=world.org)))
    assert len(document["memory"][0]["entries"]) == 10_000
    # Ten times the entries (2.2 MB more of them in the document) in less than twice the memory.
    assert large < 2 * small, (small, large)
