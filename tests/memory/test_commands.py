"""Memory management commands [O4, P2, X1]: each prints exactly one JSON object."""

import io
import json
from collections.abc import Sequence
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.models import Change, Entry, Evidence
from openbot import services
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation, set_status

K1, K2, K3 = (Fernet.generate_key().decode() for _ in range(3))


def run(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command(*args, stdout=out)
    text = out.getvalue()
    result: dict[str, Any] = json.loads(text)
    assert text.strip() == json.dumps(result), "exactly one JSON object"
    return result


def refuse_decryption(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(tokens: Sequence[str]) -> list[str | None]:
        raise AssertionError("the command decrypted a value")

    # Every decryption goes through it, `decrypt` too.
    monkeypatch.setattr("openbot.fields.decrypt_all", refuse)


def build_pool(world: World) -> dict[str, Entry]:
    """Two facts of alice (one invalidated), a group fact, an observation, bob's pin."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    mine = fact(
        [ItemFactory.create(chat=chat, person=world.alice.person, text="I book the trains")],
        topics=["trip-planning", "rail"],
    )
    old = fact(
        [ItemFactory.create(chat=chat, person=world.alice.person, text="I fly")],
        topics=["trip-planning"],
    )
    set_status(old, Entry.Status.INVALIDATED)
    group_chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [ItemFactory.create(chat=group_chat, person=world.carol.person, text="Standup is at nine")],
        topics=["team"],
    )
    seen = observation([group], audience=f"for:channel:{world.channel.id}", topics=["team"])
    pin = world.bob.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Remember", "content": "short answers"}},
        format="json",
    )
    return {
        "mine": mine,
        "old": old,
        "group": group,
        "seen": seen,
        "pin": Entry.objects.get(id=pin.json()["id"]),
    }


# purge_memory


def test_purge_memory_removes_like_the_route(world: World) -> None:
    pool = build_pool(world)
    before = Change.objects.count()

    result = run("purge_memory", "--bot", world.bot.id, "--tag", f"from:{world.carol.person.id}")

    assert result == {"removed": 2}
    assert not Entry.objects.filter(id__in=[pool["group"].id, pool["seen"].id]).exists()
    assert not Evidence.objects.filter(entry_id=pool["group"].id).exists()
    assert Entry.objects.count() == 3
    # [P2] The purge is logged like any change.
    assert Change.objects.count() == before + 1
    assert json.loads(Change.objects.latest("version").payload)[0]["op"] == "purge"


def test_purge_memory_by_chat_and_org(world: World) -> None:
    pool = build_pool(world)
    chat_tag = next(
        tag for tag in pool["mine"].tag_rows.values_list("tag", flat=True) if tag[:5] == "chat:"
    )

    assert run("purge_memory", "--bot", world.bot.id, "--tag", chat_tag) == {"removed": 2}
    assert run("purge_memory", "--bot", world.bot.id, "--tag", f"org:{world.org.id}") == {
        "removed": 3
    }
    assert run("purge_memory", "--bot", world.bot.id, "--tag", f"org:{world.org.id}") == {
        "removed": 0
    }


def test_purge_memory_never_decrypts(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    build_pool(world)
    refuse_decryption(monkeypatch)

    assert run("purge_memory", "--bot", world.bot.id, "--tag", f"org:{world.org.id}") == {
        "removed": 5
    }


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--bot", "bot_unknown", "--tag", "from:u_1"], "--bot"),
        (["--bot", "{bot}", "--tag", "for:bot"], "--tag"),
        (["--bot", "{bot}", "--tag", "testing"], "--tag"),
        (["--bot", "{bot}", "--tag", "from:"], "--tag"),
        (["--bot", "{bot}"], "--tag"),
        (["--tag", "from:u_1"], "--bot"),
        (["--bot", "{linked}", "--tag", "from:u_1"], "--bot"),
    ],
)
def test_purge_memory_names_the_bad_option(world: World, args: list[str], option: str) -> None:
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    args = [arg.format(bot=world.bot.id, linked=linked.id) for arg in args]

    with pytest.raises(CommandError, match=option):
        call_command("purge_memory", *args, stdout=io.StringIO())


# memory_stats


def test_memory_stats_counts_without_reading_content(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = build_pool(world)
    world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory",
        {"command": {"_tag": "Forget", "id": pool["mine"].id}},
        format="json",
    )
    refuse_decryption(monkeypatch)

    result = run("memory_stats", "--bot", world.bot.id)

    assert result == {
        "bot": world.bot.id,
        "pool": world.bot.id,
        "version": 7,
        "entries": 5,
        "layers": {"fact": 3, "observation": 1, "pinned": 1},
        "statuses": {"active": 3, "invalidated": 1, "retracted": 1},
        "topics": {"rail": 1, "team": 2, "trip-planning": 2},
    }


def test_memory_stats_of_an_empty_and_of_a_linked_bot(world: World) -> None:
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    empty = {
        "version": 0,
        "entries": 0,
        "layers": {"fact": 0, "observation": 0, "pinned": 0},
        "statuses": {"active": 0, "invalidated": 0, "retracted": 0},
        "topics": {},
    }
    assert run("memory_stats", "--bot", world.bot.id) == {
        "bot": world.bot.id,
        "pool": world.bot.id,
        **empty,
    }
    build_pool(world)

    result = run("memory_stats", "--bot", linked.id)

    assert result["bot"] == linked.id
    assert result["pool"] == world.bot.id
    assert result["entries"] == 5


def test_memory_stats_names_the_bad_option(world: World) -> None:
    with pytest.raises(CommandError, match="--bot"):
        call_command("memory_stats", "--bot", "bot_unknown", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--bot"):
        call_command("memory_stats", stdout=io.StringIO())
