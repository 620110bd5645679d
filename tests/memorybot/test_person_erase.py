"""[D3] `manage.py person_erase --org O --person P [--dry-run]`: after it, a decrypt-all scan of
every encrypted column of every model finds none of the person's words, nor anything learned
from them; other people's memory and chats are unchanged; `--dry-run` changes nothing; running
it again changes nothing more. The scene is the purge-copies scene (alice's words learned,
enriched, concluded from and carried by model calls), plus alice's words in carol's group chat
and carol's own words and fact there."""

import io
import json
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import DatabaseError, connection

from chats.models import Item
from conversations.erase import MARKER
from memory.models import Entry
from openbot.models import ChannelMember, Grant, Membership, Token
from tests.factories import BotFactory, ChatFactory, GrantFactory, ItemFactory
from tests.memory.builders import fact
from tests.memorybot.learning_world import postgresql_only
from tests.memorybot.test_purge_copies import (  # noqa: F401 (`scene` is a fixture)
    FROM_PURGED,
    KEPT_FACT,
    KEPT_ITEM,
    KEPT_REPLY,
    Scene,
    encrypted_values,
    mark,
    scene,
    where,
)

ALICE_ELSEWHERE = mark("alice-in-carols-chat")
CAROL_SAID = mark("carol-said")
CAROL_FACT = mark("carol-fact")
ALICES = [*FROM_PURGED, KEPT_FACT, KEPT_ITEM, KEPT_REPLY, ALICE_ELSEWHERE]


@pytest.fixture
def erasable(scene: Scene) -> Scene:  # noqa: F811 (the fixture imported above)
    world = scene.world
    group = ChatFactory.create(owner=world.carol, bot=world.bot, channel=world.channel)
    ItemFactory.create(
        chat=group, person=world.alice.person, text=f"Count me in. {ALICE_ELSEWHERE}"
    )
    said = ItemFactory.create(chat=group, person=world.carol.person, text=f"Hike! {CAROL_SAID}")
    fact([said], content=f"the group hikes {CAROL_FACT}")
    return scene


def erase(erasable: Scene, *flags: str) -> dict[str, Any]:
    out = io.StringIO()
    world = erasable.world
    call_command(
        "person_erase", "--org", world.org.id, "--person", world.alice.person.id, *flags, stdout=out
    )
    receipt: dict[str, Any] = json.loads(out.getvalue())
    return receipt


def state() -> tuple[list[Any], dict[str, int]]:
    """Every decrypted value and every table's row count."""
    counts = {model._meta.label: model._default_manager.count() for model in apps.get_models()}
    return sorted(encrypted_values(), key=repr), counts


def test_nothing_of_the_person_is_left_in_any_encrypted_column(erasable: Scene) -> None:
    world = erasable.world
    assert all(where(canary) for canary in ALICES)
    carols = {canary: where(canary) for canary in (CAROL_SAID, CAROL_FACT)}

    receipt = erase(erasable)

    assert {canary: where(canary) for canary in ALICES} == {canary: set() for canary in ALICES}
    assert {canary: where(canary) for canary in (CAROL_SAID, CAROL_FACT)} == carols
    assert receipt["entries"] == 3  # her two facts, and the observation drawn from one
    assert receipt["evidenceRows"] == 2  # one per fact (an observation has none of its own)
    assert receipt["logPayloads"] >= 2
    assert receipt["itemsMarked"] == 1 and receipt["chatsEmptied"] == 2
    assert receipt["tokensRevoked"] == 1 and receipt["membershipsEnded"] == 2
    assert receipt["modelCallsBlanked"] > 0 and receipt["enrichmentsDeleted"] > 0
    # Her words in carol's chat are a marker now; the item keeps its place.
    assert [item.text for item in carols_chat_items(erasable)] == [
        MARKER,
        f"Hike! {CAROL_SAID}",
    ]
    assert receipt["grantsRevoked"] == 1  # her write grant on the bot
    assert not Grant.objects.filter(person=world.alice.person).exists()
    assert not Token.objects.filter(person=world.alice.person).exists()
    assert not Membership.objects.filter(person=world.alice.person).exists()
    assert not ChannelMember.objects.filter(person=world.alice.person).exists()
    assert not Entry.objects.filter(tag_rows__tag=f"from:{world.alice.person.id}").exists()
    assert world.alice.client().get("/v1/me/settings").status_code == 401


def carols_chat_items(erasable: Scene) -> list[Item]:
    world = erasable.world
    return list(
        Item.objects.filter(chat__owner=world.carol.person, chat__channel=world.channel)
        .order_by("seq")
        .only("text")
    )


def test_a_dry_run_changes_nothing_and_counts_what_the_erasure_does(erasable: Scene) -> None:
    before = state()
    dry = erase(erasable, "--dry-run")
    assert state() == before
    done = erase(erasable)
    assert {**dry, "dryRun": False} == done


def test_running_it_again_changes_nothing_more(erasable: Scene) -> None:
    """A rerun finishes what a crash left; after a whole erasure it finds nothing left."""
    erase(erasable)
    after = state()
    again = erase(erasable)
    assert state() == after
    assert again["entries"] == again["tokensRevoked"] == again["membershipsEnded"] == 0
    assert again["grantsRevoked"] == 0
    assert again["evidenceRows"] == again["logPayloads"] == 0
    assert again["modelCallsBlanked"] == again["enrichmentsDeleted"] == 0


@postgresql_only
def test_a_crash_between_pools_leaves_each_pool_whole_and_a_rerun_finishes(
    erasable: Scene,
) -> None:
    """A second bot's pool holds a fact of alice's too; deleting its entries fails (a trigger
    of the database's own, as a crash would). The pool erased before it is done, the failing
    one still holds its entries, nothing else of hers is touched yet; once the fault is gone,
    a rerun ends where an erasure without the crash ends."""
    world = erasable.world
    other = BotFactory.create(organization=world.org, name="second")
    GrantFactory.create(bot=other, level="read", person=world.alice.person)
    chat = ChatFactory.create(owner=world.alice, bot=other)
    second = mark("second-pool")
    fact([ItemFactory.create(chat=chat, person=world.alice.person)], content=f"{second} fact")
    failing, first = max(world.bot.id, other.id), min(world.bot.id, other.id)
    mine = f"from:{world.alice.person.id}"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION erase_fault() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN RAISE EXCEPTION 'injected fault'; END $$;"
            "CREATE TRIGGER erase_fault BEFORE DELETE ON memory_entry FOR EACH ROW"
            f" WHEN (OLD.bot_id = '{failing}') EXECUTE FUNCTION erase_fault();"
        )
    try:
        with pytest.raises(DatabaseError, match="injected fault"):
            erase(erasable)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER erase_fault ON memory_entry; DROP FUNCTION erase_fault();")

    assert not Entry.objects.filter(bot_id=first, tag_rows__tag=mine).exists()
    assert Entry.objects.filter(bot_id=failing, tag_rows__tag=mine).exists()
    assert Token.objects.filter(person=world.alice.person).exists()
    assert Membership.objects.filter(person=world.alice.person).exists()

    erase(erasable)
    assert {canary: where(canary) for canary in [*ALICES, second]} == {
        canary: set() for canary in [*ALICES, second]
    }
    assert not Entry.objects.filter(tag_rows__tag=mine).exists()
    assert not Membership.objects.filter(person=world.alice.person).exists()
