"""[L1, H5, Q4] A full listing and a `context` without a query are one statement each: they use
the rights last read for the reader in this process as a guess, read them again in their own
snapshot, and stand only if they match.

A wrong guess never shows anything: the statement is run again with the rights it saw (or,
failing that, under the pool's lock). These tests change a person's rights between two reads,
so the second one starts from a stale guess.
"""

from collections.abc import Callable
from typing import Any

import pytest

from memory.access import Reader
from memory.models import Change, Entry
from memory.selectors import context, entries_for_reader
from memory.services import ItemEvidence, entry_create_in, entry_remember, pool_change
from openbot import services
from openbot.models import Channel, ChannelMember
from tests.conftest import World
from tests.factories import Actor, ChatFactory, ItemFactory
from tests.memory.builders import fact


def reader_of(world: World, actor: Actor) -> Reader:
    return Reader(organization_id=world.org.id, person_id=actor.person.id, bot=world.bot)


def listed(world: World, actor: Actor) -> set[str]:
    entries, _ = entries_for_reader(pool_id=world.bot.id, reader=reader_of(world, actor), tags=[])
    return {entry["id"] for entry in entries}


def in_context(world: World, actor: Actor) -> set[str]:
    """[S1] The entries of `context` without a query; here every entry is active and fits."""
    return set(context(world.bot, reader_of(world, actor), limit=10_000).entry_ids)


Read = Callable[[World, Actor], set[str]]
reads = pytest.mark.parametrize("read", [listed, in_context])


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


@reads
def test_leaving_a_channel_between_two_reads_hides_what_it_gave(world: World, read: Read) -> None:
    own, group = pinned(world, world.carol), group_fact(world)
    assert read(world, world.carol) == {own, group}
    services.channel_member_remove(channel=world.channel, person=world.carol.person)
    assert read(world, world.carol) == {own}


@reads
def test_joining_a_channel_between_two_reads_shows_what_it_gives(world: World, read: Read) -> None:
    own, group = pinned(world, world.bob), group_fact(world)
    assert read(world, world.bob) == {own}
    services.channel_member_add(channel=world.channel, person=world.bob.person)
    assert read(world, world.bob) == {own, group}


@reads
def test_joining_a_channel_after_an_empty_read_shows_what_it_gives(
    world: World, read: Read
) -> None:
    """An empty answer has no row to carry the rights: a listing reads them with whether the
    reader sees anything, in one more statement; a context reads under the pool's lock."""
    group = group_fact(world)
    assert read(world, world.bob) == set()
    services.channel_member_add(channel=world.channel, person=world.bob.person)
    assert read(world, world.bob) == {group}


@reads
def test_losing_the_bot_between_two_reads_hides_what_is_for_its_users(
    world: World, read: Read
) -> None:
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
    assert read(world, world.bob) == {own, for_users}
    services.grant_revoke(bot=world.bot, organization=world.org)
    assert read(world, world.bob) == {own}


def test_a_listing_read_again_is_one_statement(
    world: World, django_assert_num_queries: Any
) -> None:
    """[Q4] With the rights of the previous listing as its guess: no BEGIN, lock or COMMIT."""
    own, group = pinned(world, world.carol), group_fact(world)
    listed(world, world.carol)
    with django_assert_num_queries(1):
        assert listed(world, world.carol) == {own, group}


def test_a_context_read_again_is_one_statement(
    world: World, django_assert_num_queries: Any
) -> None:
    """[S1, Q4] The entries as far as the limit reaches, the content of those chosen and the
    checks in one statement: no BEGIN, lock, rights or COMMIT of their own."""
    own, group = pinned(world, world.carol), group_fact(world)
    in_context(world, world.carol)
    with django_assert_num_queries(1):
        assert in_context(world, world.carol) == {own, group}


def test_a_long_context_is_one_statement_too(world: World, django_assert_num_queries: Any) -> None:
    """[S1, Q4] However many entries fit: it reads as far as the limit reaches."""
    for _ in range(40):
        pinned(world, world.carol)
    reader = reader_of(world, world.carol)
    entries, _ = entries_for_reader(pool_id=world.bot.id, reader=reader, tags=[])
    in_order = [entry["id"] for entry in entries]
    assert context(world.bot, reader, limit=100_000).entry_ids == in_order
    # Five lines of "- pinned for carol\n" (19 characters) fit in 95 and in 96, a sixth does
    # not: in 95 it would start at the limit and is not read, in 96 it is read and ends it.
    for limit in (95, 96, 100):
        with django_assert_num_queries(1):
            assert context(world.bot, reader, limit=limit).entry_ids == in_order[:5]
    assert context(world.bot, reader, limit=0).entry_ids == []


def blocked_for_carol(world: World, content: str) -> str:
    """A pinned entry admitted for carol whose evidence is bob's: carol may not see it [V4]."""
    with pool_change(pool_id=world.bot.id, by=Change.By.PERSON) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.PINNED,
            content=content,
            tags=[f"for:person:{world.carol.person.id}", f"org:{world.org.id}"],
            evidence=[ItemEvidence("", 0, f"person:{world.bob.person.id}", world.org.id)],
        ).id


def carols_facts(world: World, count: int) -> list[str]:
    """Facts of carol's own chat, after every pinned entry in memory order [E6]."""
    chat = ChatFactory.create(owner=world.carol, bot=world.bot)
    return [
        fact([ItemFactory.create(chat=chat, person=world.carol.person)]).id for _ in range(count)
    ]


def test_blocked_entries_that_leave_room_for_more_are_read_under_the_lock(world: World) -> None:
    """Two blocked entries take the room of 100 characters as far as the statement can tell;
    carol sees neither, so her five facts fit (five lines of "- a fact\n", 45 characters):
    they lie past what the statement read, and are read under the lock."""
    facts = carols_facts(world, 5)
    blocked_ids = [blocked_for_carol(world, "x" * 60) for _ in range(2)]
    reader = reader_of(world, world.carol)
    used = context(world.bot, reader, limit=100).entry_ids
    assert set(used) == set(facts)
    assert not set(used) & set(blocked_ids)
    assert context(world.bot, reader, limit=100).entry_ids == used


def test_a_blocked_entry_among_all_there_are_is_one_statement(
    world: World, django_assert_num_queries: Any
) -> None:
    """When the statement read every admitted entry, a blocked one leaves no room for more."""
    facts = carols_facts(world, 3)
    blocked_for_carol(world, "b")
    reader = reader_of(world, world.carol)
    context(world.bot, reader, limit=10_000)
    with django_assert_num_queries(1):
        assert set(context(world.bot, reader, limit=10_000).entry_ids) == set(facts)


def test_a_blocked_entry_before_the_end_is_left_out(
    world: World, django_assert_num_queries: Any
) -> None:
    """[V4] A blocked entry among those the statement reads is skipped, and the context that
    ends within them stands."""
    facts = carols_facts(world, 3)
    blocked_for_carol(world, "b")  # its line of 4 characters leaves the third fact within 25
    reader = reader_of(world, world.carol)
    context(world.bot, reader, limit=25)
    with django_assert_num_queries(1):
        used = context(world.bot, reader, limit=25).entry_ids
    # Two lines of "- a fact\n" (9 characters) fit in 25, a third does not.
    assert len(used) == 2 and set(used) <= set(facts)


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
