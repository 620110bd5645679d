"""[D2] `POST /v1/bots/:botId/memory {"command": {"_tag": "ForgetMine"}}` and its Python API
`entries_forget_mine`: a Forget ([P1], [V10]) of every entry the person is behind and may see,
in one change — `{"retracted", "excluded", "version"}`."""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from memory.access import Reader, visible_ids
from memory.forgetting import Forgotten, entries_forget_mine, entry_forget
from memory.models import Change, Entry, EntryTag, Exclusion
from openbot import services
from openbot.errors import ApplicationError
from openbot.models import Channel
from tests.conftest import Actor, World, error_fields
from tests.factories import ChannelFactory, ChatFactory, EntryFactory, ItemFactory
from tests.memory.builders import fact, set_status

FORGET_MINE = {"_tag": "ForgetMine"}


def url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory"


def command(actor: Actor, bot_id: str, body: dict[str, Any], **headers: Any) -> Any:
    return actor.client().post(
        f"/v1/bots/{bot_id}/memory", {"command": body}, format="json", **headers
    )


def listed(actor: Actor, world: World) -> set[str]:
    response = actor.client().get(url(world))
    assert response.status_code == 200
    return {entry["id"] for entry in response.json()["entries"]}


def version(actor: Actor, world: World) -> int:
    return int(actor.client().get(url(world)).json()["version"])


def private_fact(world: World, actor: Actor) -> Entry:
    chat = ChatFactory.create(owner=actor, bot=world.bot)
    return fact([ItemFactory.create(chat=chat, person=actor.person)])


def group_fact(world: World, channel: Channel, *said_by: Actor) -> Entry:
    chat = ChatFactory.create(owner=said_by[0], bot=world.bot, channel=channel)
    return fact([ItemFactory.create(chat=chat, person=actor.person) for actor in said_by])


@dataclass
class Pool:
    """What alice is behind and may see, and what she is not or may not."""

    private: Entry  # hers alone: retracted
    pinned: Entry  # Remembered by her: retracted
    invalidated: Entry  # hers, in the history [V6]: retracted
    shared: Entry  # said by alice and carol in the channel: alice is excluded
    carols: Entry  # said by carol in alice's channel: alice sees it, is not behind it
    bobs: Entry  # bob's private fact
    unseen: Entry  # said by alice in a channel she has left: she may not see it
    gone: Entry  # hers, already retracted

    def untouched(self) -> list[Entry]:
        return [self.carols, self.bobs, self.unseen, self.gone]


@pytest.fixture
def pool(world: World) -> Pool:
    left = ChannelFactory.create(
        organization=world.org, members=[world.alice.person, world.carol.person]
    )
    built = Pool(
        private=private_fact(world, world.alice),
        pinned=EntryFactory.create(author=world.alice, bot=world.bot),
        invalidated=private_fact(world, world.alice),
        shared=group_fact(world, world.channel, world.alice, world.carol),
        carols=group_fact(world, world.channel, world.carol),
        bobs=private_fact(world, world.bob),
        unseen=group_fact(world, left, world.alice),
        gone=private_fact(world, world.alice),
    )
    set_status(built.invalidated, Entry.Status.INVALIDATED)
    set_status(built.gone, Entry.Status.RETRACTED)
    services.channel_member_remove(channel=left, person=world.alice.person)
    return built


def snapshot(entries: list[Entry]) -> dict[str, Any]:
    """Status, time, tags and exclusions of `entries`, to tell that nothing changed."""
    rows = Entry.objects.filter(id__in=[entry.id for entry in entries])
    return {
        row.id: (
            row.status,
            row.updated_at,
            sorted(EntryTag.objects.filter(entry_id=row.id).values_list("tag", flat=True)),
            sorted(Exclusion.objects.filter(entry_id=row.id).values_list("person_id", flat=True)),
        )
        for row in rows
    }


def test_retracts_what_you_alone_are_behind_and_leaves_the_rest(world: World, pool: Pool) -> None:
    """[D2, P1] Retracted where alice alone is behind it; excluded where others are too."""
    alice, carol = world.alice.person.id, world.carol.person.id
    before = version(world.alice, world)

    response = command(world.alice, world.bot.id, FORGET_MINE)

    assert response.status_code == 200, response.json()
    assert response.json() == {"retracted": 3, "excluded": 1, "version": before + 1}
    for entry in [pool.private, pool.pinned, pool.invalidated]:
        assert Entry.objects.get(id=entry.id).status == Entry.Status.RETRACTED
    shared = Entry.objects.get(id=pool.shared.id)
    assert shared.status == Entry.Status.ACTIVE
    tags = set(EntryTag.objects.filter(entry_id=shared.id).values_list("tag", flat=True))
    assert f"from:{alice}" not in tags and f"for:person:{alice}" not in tags
    assert f"from:{carol}" in tags
    assert Exclusion.objects.filter(entry_id=shared.id, person_id=alice).exists()
    # What she sees now: only carol's fact, which she is not behind.
    assert listed(world.alice, world) == {pool.carols.id}
    assert pool.shared.id in listed(world.carol, world)


def test_entries_of_others_and_entries_you_may_not_see_are_untouched(
    world: World, pool: Pool
) -> None:
    """[D2, V4] Only what alice may see now: not bob's, not carol's own, not one from a channel
    she left (though she is behind it), not one already retracted."""
    before = snapshot(pool.untouched())

    command(world.alice, world.bot.id, FORGET_MINE)

    assert snapshot(pool.untouched()) == before
    assert listed(world.bob, world) == {pool.bobs.id}


def test_one_change_one_version_logged_as_forget_logs_it(world: World, pool: Pool) -> None:
    """[D2, E7] One version and one log record, by the person, with the ids touched and the
    operations a single Forget records for each."""
    changes = Change.objects.count()

    body = command(world.alice, world.bot.id, FORGET_MINE).json()

    assert Change.objects.count() == changes + 1
    change = Change.objects.get(version=body["version"])
    assert change.by == Change.By.PERSON
    operations = json.loads(change.payload)
    retracted = [pool.private.id, pool.pinned.id, pool.invalidated.id]
    assert sorted(op["id"] for op in operations if op["op"] == "retracted") == sorted(retracted)
    assert [op for op in operations if op["op"] != "retracted"] == [
        {"id": pool.shared.id, "op": "forget"}
    ]
    assert sorted(change.entry_rows.values_list("entry_id", flat=True)) == sorted(
        [*retracted, pool.shared.id]
    )
    # [A3] The log shows each reader the ids they may see now: carol the shared entry.
    log = world.carol.client().get(f"{url(world)}/log").json()
    assert log["version"] == body["version"]
    assert log["changes"][-1] == {
        "version": body["version"],
        "at": change.at,
        "by": "person",
        "ids": [pool.shared.id],
    }


def test_an_entry_you_took_back_already_is_left_as_it_is(world: World, pool: Pool) -> None:
    """[D2, P1] After a single Forget the entry is no longer for carol: ForgetMine leaves it as
    that Forget left it."""
    reader = Reader(organization_id=world.org.id, person_id=world.carol.person.id, bot=world.bot)
    entry_forget(pool_id=world.bot.id, reader=reader, entry_id=pool.shared.id)
    one_by_one = snapshot([pool.shared])[pool.shared.id]

    command(world.carol, world.bot.id, FORGET_MINE)

    # Her own fact, which she alone is behind, is retracted.
    assert snapshot([pool.shared])[pool.shared.id] == one_by_one
    assert Entry.objects.get(id=pool.carols.id).status == Entry.Status.RETRACTED


def test_a_group_chat_no_longer_uses_what_you_forgot(world: World, pool: Pool) -> None:
    """[V10] alice is still in the channel: the shared fact is no longer used in its group
    chats; carol's own fact, which alice was never behind, still is."""
    circle = Reader.circle(channel_id=world.channel.id, organization_id=world.org.id)
    wanted = [pool.shared.id, pool.carols.id]
    assert visible_ids(pool_id=world.bot.id, reader=circle, ids=wanted, active_only=True) == set(
        wanted
    )

    command(world.alice, world.bot.id, FORGET_MINE)

    assert visible_ids(pool_id=world.bot.id, reader=circle, ids=wanted, active_only=True) == {
        pool.carols.id
    }


def test_nothing_to_forget_takes_no_version(world: World, pool: Pool) -> None:
    command(world.alice, world.bot.id, FORGET_MINE)
    changes, current = Change.objects.count(), version(world.alice, world)

    again = command(world.alice, world.bot.id, FORGET_MINE)

    assert again.status_code == 200
    assert again.json() == {"retracted": 0, "excluded": 0, "version": current}
    assert Change.objects.count() == changes


def test_a_reader_without_write_rights_forgets_as_with_forget(world: World, pool: Pool) -> None:
    """The permission matrix of Forget: `read` on the bot is enough (bob reads through the
    organization), as it is for a single Forget."""
    mine = EntryFactory.create(author=world.bob, bot=world.bot)
    assert command(world.bob, world.bot.id, {"_tag": "Forget", "id": mine.id}).status_code == 200

    response = command(world.bob, world.bot.id, FORGET_MINE)

    assert response.status_code == 200
    assert response.json()["retracted"] == 1
    assert Entry.objects.get(id=pool.bobs.id).status == Entry.Status.RETRACTED


def test_another_organizations_bot_is_not_found(world: World, pool: Pool) -> None:
    """[X4] alice may not use dave's bot, nor dave alice's: 404, and nothing changes."""
    before, changes = snapshot(list(Entry.objects.all())), Change.objects.count()

    for actor, bot_id in [(world.alice, world.other_bot.id), (world.dave, world.bot.id)]:
        response = command(actor, bot_id, FORGET_MINE)
        assert response.status_code == 404
        assert set(response.json()) == {"error"}

    assert snapshot(list(Entry.objects.all())) == before
    assert Change.objects.count() == changes


def test_a_bad_tag_names_the_three_commands(world: World) -> None:
    response = command(world.alice, world.bot.id, {"_tag": "Forgetmine"})

    assert response.status_code == 400
    assert "command._tag" in error_fields(response)
    message = response.json()["error"]["message"]
    for tag in ['"Remember"', '"Forget"', '"ForgetMine"']:
        assert tag in message


def test_forget_mine_takes_no_other_field(world: World, pool: Pool) -> None:
    response = command(world.alice, world.bot.id, {**FORGET_MINE, "id": pool.private.id})

    assert response.status_code == 400
    assert "command.id" in error_fields(response)
    assert Entry.objects.get(id=pool.private.id).status == Entry.Status.ACTIVE


def test_a_retry_with_the_same_key_answers_the_same(world: World, pool: Pool) -> None:
    """[F9] The first answer again, changing nothing."""
    key = {"HTTP_IDEMPOTENCY_KEY": "forget-mine-1"}
    first = command(world.alice, world.bot.id, FORGET_MINE, **key)
    changes = Change.objects.count()

    again = command(world.alice, world.bot.id, FORGET_MINE, **key)

    assert again.status_code == first.status_code == 200
    assert again.json() == first.json()
    assert (first.json()["retracted"], first.json()["excluded"]) == (3, 1)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Change.objects.count() == changes


def test_the_python_api(world: World, pool: Pool) -> None:
    """[D2] `entries_forget_mine` next to `entry_forget`: for a person reading through a bot;
    a reader circle has nothing of its own to forget."""
    alice = Reader(organization_id=world.org.id, person_id=world.alice.person.id, bot=world.bot)

    done = entries_forget_mine(pool_id=world.bot.id, reader=alice)

    assert done == Forgotten(retracted=3, excluded=1, version=done.version)
    assert done.version == Change.objects.latest("version").version
    circle = Reader.circle(channel_id=world.channel.id, organization_id=world.org.id)
    with pytest.raises(ApplicationError):
        entries_forget_mine(pool_id=world.bot.id, reader=circle)
