"""[L1, H5, Q4] A full listing is one statement: it uses the rights last read for the reader in
this process as a guess, reads them again in its own snapshot, and stands only if they match.

A wrong guess never shows anything: the statement is run again with the rights it saw (or,
failing that, under the pool's lock). These tests change a person's rights between two
listings, so the second one starts from a stale guess.
"""

from typing import Any

from memory.access import Reader
from memory.models import Change, Entry
from memory.selectors import entries_for_reader
from memory.services import ItemEvidence, entry_create_in, entry_remember, pool_change
from openbot import services
from openbot.models import Channel, ChannelMember
from tests.conftest import World
from tests.factories import Actor, ChatFactory, ItemFactory
from tests.memory.builders import fact


def listed(world: World, actor: Actor) -> set[str]:
    reader = Reader(organization_id=world.org.id, person_id=actor.person.id, bot=world.bot)
    entries, _ = entries_for_reader(pool_id=world.bot.id, reader=reader, tags=[])
    return {entry["id"] for entry in entries}


def pinned(world: World, actor: Actor) -> str:
    return entry_remember(
        pool_id=world.bot.id,
        person_id=actor.person.id,
        organization_id=world.org.id,
        content=f"pinned for {actor.person.name}",
        topics=[],
    ).id


def group_fact(world: World) -> str:
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    return fact([ItemFactory.create(chat=chat, person=world.alice.person)]).id


def test_leaving_a_channel_between_two_listings_hides_what_it_gave(world: World) -> None:
    own, group = pinned(world, world.carol), group_fact(world)
    assert listed(world, world.carol) == {own, group}
    services.channel_member_remove(channel=world.channel, person=world.carol.person)
    assert listed(world, world.carol) == {own}


def test_joining_a_channel_between_two_listings_shows_what_it_gives(world: World) -> None:
    own, group = pinned(world, world.bob), group_fact(world)
    assert listed(world, world.bob) == {own}
    services.channel_member_add(channel=world.channel, person=world.bob.person)
    assert listed(world, world.bob) == {own, group}


def test_joining_a_channel_after_an_empty_listing_shows_what_it_gives(world: World) -> None:
    """An empty answer has no row to carry the rights: they are read with whether the reader
    sees anything, in one more statement."""
    group = group_fact(world)
    assert listed(world, world.bob) == set()
    services.channel_member_add(channel=world.channel, person=world.bob.person)
    assert listed(world, world.bob) == {group}


def test_losing_the_bot_between_two_listings_hides_what_is_for_its_users(world: World) -> None:
    """[H6] bob uses the bot through the organization's grant: `for:bot` admits him until the
    grant goes."""
    own = pinned(world, world.bob)
    with pool_change(pool_id=world.bot.id, by=Change.By.PERSON) as change:
        for_users = entry_create_in(
            change,
            layer=Entry.Layer.PINNED,
            content="for everyone who uses the bot",
            tags=["for:bot", f"org:{world.org.id}"],
            evidence=[ItemEvidence("", 0, f"person:{world.bob.person.id}", world.org.id)],
        ).id
    assert listed(world, world.bob) == {own, for_users}
    services.grant_revoke(bot=world.bot, organization=world.org)
    assert listed(world, world.bob) == {own}


def test_a_listing_read_again_is_one_statement(
    world: World, django_assert_num_queries: Any
) -> None:
    """[Q4] With the rights of the previous listing as its guess: no BEGIN, lock or COMMIT."""
    own, group = pinned(world, world.carol), group_fact(world)
    listed(world, world.carol)
    with django_assert_num_queries(1):
        assert listed(world, world.carol) == {own, group}


def test_an_empty_listing_read_again_is_two_statements(
    world: World, django_assert_num_queries: Any
) -> None:
    """[Q4] The listing, then its version and rights with whether bob sees anything."""
    listed(world, world.bob)
    with django_assert_num_queries(2):
        assert listed(world, world.bob) == set()


def test_a_channel_id_with_a_comma_is_one_channel(world: World) -> None:
    """The rights a statement saw come back whole (a JSON array), never split on a comma:
    a channel named like two channels gives none of the second's entries."""
    odd = Channel.objects.create(id=f"ch_x,{world.channel.id}", organization=world.org)
    ChannelMember.objects.create(channel=odd, person=world.bob.person)
    own, _ = pinned(world, world.bob), group_fact(world)
    assert listed(world, world.bob) == {own}
    assert listed(world, world.bob) == {own}
