"""POST /v1/bots/:botId/memory/purge [A4, P2, P3]."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from chats.services import chat_history_delete
from memory.models import Change, ChangeEntry, Closure, Entry, EntrySource, EntryTag, Evidence
from tests.conftest import World, error_fields
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation


@dataclass
class Pool:
    """alice and carol in a group chat, alice and bob privately; observations over them."""

    group: Entry
    group_chat_id: str
    alices: Entry
    alices_chat_id: str
    bobs: Entry
    team: Entry  # an observation over the group fact, for the channel
    private: Entry  # an observation over alice's private fact, for alice
    pin: str


@pytest.fixture
def pool(world: World) -> Pool:
    group_chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [
            ItemFactory.create(chat=group_chat, person=world.alice.person),
            ItemFactory.create(chat=group_chat, person=world.carol.person),
        ],
        topics=["team"],
    )
    alices_chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    alices = fact([ItemFactory.create(chat=alices_chat, person=world.alice.person)])
    bobs = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.bob, bot=world.bot), person=world.bob.person
            )
        ]
    )
    team = observation([group], audience=f"for:channel:{world.channel.id}")
    private = observation([alices], audience=f"for:person:{world.alice.person.id}")
    pin = world.bob.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "remember me"}},
        format="json",
    )
    return Pool(
        group=group,
        group_chat_id=group_chat.id,
        alices=alices,
        alices_chat_id=alices_chat.id,
        bobs=bobs,
        team=team,
        private=private,
        pin=pin.json()["id"],
    )


def purge(world: World, tag: str) -> Any:
    return world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge", {"tag": tag}, format="json"
    )


def concrete_tag(world: World, pool: Pool, tag: str) -> str:
    """`from:carol` → carol's id, `chat:group` → the group chat, `org:` → world's org …"""
    kind, _, name = tag.partition(":")
    if kind == "from":
        return f"from:{world.actor(name).person.id}"
    if kind == "chat":
        return f"chat:{pool.group_chat_id if name == 'group' else pool.alices_chat_id}"
    if kind == "channel":
        return f"channel:{world.channel.id}"
    return f"org:{world.org.id}"


def remaining() -> set[str]:
    return set(Entry.objects.values_list("id", flat=True))


@pytest.mark.parametrize(
    ("tag", "gone"),
    [
        ("from:carol", {"group", "team"}),
        ("from:alice", {"group", "team", "alices", "private"}),
        ("from:bob", {"bobs", "pin"}),
        ("chat:group", {"group", "team"}),
        ("chat:alices", {"alices", "private"}),
        ("channel:", {"group", "team"}),
        ("org:", {"group", "team", "alices", "private", "bobs", "pin"}),
    ],
)
def test_purge_by_each_tag_kind_removes_derived_observations(
    world: World, pool: Pool, tag: str, gone: set[str], django_capture_on_commit_callbacks: Any
) -> None:
    tag = concrete_tag(world, pool, tag)
    ids = {
        "group": pool.group.id,
        "alices": pool.alices.id,
        "bobs": pool.bobs.id,
        "team": pool.team.id,
        "private": pool.private.id,
        "pin": pool.pin,
    }
    before = remaining()

    # [L2] The closure rows of purged entries go after the commit, outside the lock.
    with django_capture_on_commit_callbacks(execute=True):
        response = purge(world, tag)

    assert response.status_code == 200
    assert response.json() == {"removed": len(gone)}
    assert remaining() == before - {ids[name] for name in gone}
    gone_ids = [ids[name] for name in gone]
    for model in (EntryTag, EntrySource, Evidence, Closure):
        assert not model.objects.filter(entry_id__in=gone_ids).exists(), model


def test_purge_leaves_other_entries_readable(world: World, pool: Pool) -> None:
    purge(world, f"from:{world.carol.person.id}")

    seen = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["entries"]

    assert {entry["id"] for entry in seen} == {pool.alices.id, pool.private.id}


def test_purge_deletes_evidence_and_log_payloads_and_logs_itself(world: World, pool: Pool) -> None:
    """[P2] Matching entries, their evidence and their log payloads go; the purge is logged."""
    carol = world.carol.person.id
    touched = list(
        Change.objects.filter(entry_rows__entry_id__in=[pool.group.id, pool.team.id])
        .values_list("id", flat=True)
        .distinct()
    )
    untouched = Change.objects.exclude(id__in=touched)
    untouched_payloads = {change.id: change.payload for change in untouched}
    version = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["version"]

    assert purge(world, f"from:{carol}").json() == {"removed": 2}

    assert all(Change.objects.get(id=change_id).payload == "" for change_id in touched)
    assert not ChangeEntry.objects.filter(entry_id__in=[pool.group.id, pool.team.id]).exists()
    assert not Evidence.objects.filter(entry_id=pool.group.id).exists()
    # Changes of other entries keep their payloads.
    for change_id, payload in untouched_payloads.items():
        assert Change.objects.get(id=change_id).payload == payload
        assert payload != ""
    record = Change.objects.get(version=version + 1)
    assert record.by == Change.By.PERSON
    assert json.loads(record.payload) == [{"op": "purge", "tag": f"from:{carol}", "removed": 2}]
    after = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["version"]
    assert after == version + 1


def test_purge_that_matches_nothing_is_logged(world: World, pool: Pool) -> None:
    before = Change.objects.count()

    assert purge(world, "from:u_nobody").json() == {"removed": 0}

    assert Change.objects.count() == before + 1
    assert len(remaining()) == 6


def test_purge_never_decrypts(world: World, pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    """[A4] Purge works without reading content."""

    def refuse(tokens: Sequence[str]) -> list[str | None]:
        raise AssertionError("purge decrypted a value")

    # Every decryption goes through it, `decrypt` too.
    monkeypatch.setattr("openbot.fields.decrypt_all", refuse)

    assert purge(world, f"org:{world.org.id}").json() == {"removed": 6}


def test_purge_of_a_chat_after_its_history_was_deleted(world: World) -> None:
    """[P3] Deleting a chat's history keeps its memory; purging `chat:<id>` removes it."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    learned = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    chat_history_delete(chat=chat)
    seen = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["entries"]
    assert [entry["id"] for entry in seen] == [learned.id]

    assert purge(world, f"chat:{chat.id}").json() == {"removed": 1}

    assert not Entry.objects.filter(id=learned.id).exists()


def test_an_observation_without_the_tag_is_hidden_when_its_source_goes(world: World) -> None:
    """An observation that does not carry the purged tag loses a source: it is hidden [V4](e)."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    source = fact([ItemFactory.create(chat=chat, person=world.alice.person)])
    other = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot), person=world.alice.person
            )
        ]
    )
    conclusion = observation([source, other], audience=f"for:person:{world.alice.person.id}")
    EntryTag.objects.filter(entry_id=conclusion.id, tag=f"chat:{chat.id}").delete()

    assert purge(world, f"chat:{chat.id}").json() == {"removed": 1}

    seen = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()["entries"]
    assert [entry["id"] for entry in seen] == [other.id]


@pytest.mark.parametrize(
    "tag",
    [
        "for:bot",
        "for:person:u_1",
        "for:channel:ch_1",
        "app:calendar",
        "testing",
        "from:",
        "chat:",
        "",
        "org",
    ],
)
def test_other_tag_kinds_are_refused(world: World, pool: Pool, tag: str) -> None:
    response = purge(world, tag)

    assert response.status_code == 400
    assert "tag" in error_fields(response)
    assert len(remaining()) == 6
