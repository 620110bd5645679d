"""[V4](b, d, e), [Q4] The access rule reads an entry's `org:` tags and evidence in its own row
(`org_scope`, `rule_scope`) and its closure only if it names a source entry (`depends`); where
the row holds several values, or none were written, it reads the tags, evidence and closure
themselves. Every read path answers the same for each case here."""

from collections.abc import Callable

import pytest

from memory.access import Reader, every_visible_entry, visible_entries
from memory.models import SCOPE_MANY, Change, Entry
from memory.selectors import context, entries_for_reader, has_entries
from memory.services import ItemEvidence, entry_create_in, pool_change
from tests.conftest import World

READS: dict[str, Callable[[World, Reader], set[str]]] = {
    "listing": lambda world, reader: {
        row["id"] for row in entries_for_reader(pool_id=world.bot.id, reader=reader, tags=[])[0]
    },
    "every_visible_entry": lambda world, reader: set(
        every_visible_entry(pool_id=world.bot.id, reader=reader, active_only=True).values_list(
            "id", flat=True
        )
    ),
    "visible_entries": lambda world, reader: set(
        visible_entries(pool_id=world.bot.id, reader=reader, active_only=True).values_list(
            "id", flat=True
        )
    ),
    "context": lambda world, reader: set(context(world.bot, reader, limit=10_000).entry_ids),
}


def alice(world: World) -> Reader:
    """Alice with her rights as of now (the access functions take them as given)."""
    return Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )


def written(
    world: World,
    *,
    tags: list[str],
    evidence: list[tuple[str, str]] = (),  # type: ignore[assignment]
    sources: list[str] = (),  # type: ignore[assignment]
) -> str:
    """An entry for alice with `tags`, evidence (rule, organization) per item, and source
    entries: a fact, or an observation if it has sources."""
    items = [("chat_1", number) for number in range(1, len(evidence) + 1)]
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.OBSERVATION if sources else Entry.Layer.FACT,
            content="an entry",
            tags=[f"for:person:{world.alice.person.id}", *tags],
            source_items=[] if sources else items,
            source_entries=list(sources),
            evidence=[
                ItemEvidence(chat, seq, rule, org)
                for (chat, seq), (rule, org) in zip(items, evidence, strict=True)
            ],
        ).id


def seen_by_every_read(world: World, reader: Reader) -> set[str]:
    """What every read path shows `reader`, checked to be the same for all of them."""
    answers = {name: read(world, reader) for name, read in READS.items()}
    first = answers["listing"]
    assert all(answer == first for answer in answers.values()), answers
    assert has_entries(world.bot, reader) == bool(first)
    return first


@pytest.fixture
def own(world: World) -> tuple[str, str]:
    return f"person:{world.alice.person.id}", world.org.id


@pytest.mark.parametrize("stored", ["derived", "not derived"])
def test_each_clause_decides_as_written_in_the_row_or_not(
    world: World, own: tuple[str, str], stored: str
) -> None:
    """Alice sees what passes every clause and nothing else, whether the row holds the tags
    and evidence or, as the defaults say, leaves them to be read."""
    org, other = world.org.id, world.other_org.id
    channel = f"channel:{world.channel.id}"
    fact = written(world, tags=[f"org:{org}"], evidence=[own])
    shown = {
        fact,
        # Several evidence rules, each met: alice's own and her channel's.
        written(world, tags=[f"org:{org}"], evidence=[own, (channel, org)]),
        # An observation with no org: tag and no evidence of its own, over a fact she sees.
        written(world, tags=[], sources=[fact]),
    }
    hidden = {
        # [V4](b) An org: tag of another organization, alone or beside her own.
        written(world, tags=[f"org:{other}"], sources=[fact]),
        written(world, tags=[f"org:{org}", f"org:{other}"], sources=[fact]),
        # An org: tag that names no organization is not hers either.
        written(world, tags=["org:"], evidence=[own]),
        # [V4](d) A rule she does not satisfy, alone or beside hers; hers in another org.
        written(world, tags=[f"org:{org}"], evidence=[(f"person:{world.bob.person.id}", org)]),
        written(world, tags=[f"org:{org}"], evidence=[own, ("channel:ch_none", org)]),
        written(world, tags=[f"org:{org}"], evidence=[(own[0], other)]),
    }
    hidden_source = written(world, tags=[f"org:{other}"], sources=[fact])
    # [V4](e) Over a source she may not see.
    hidden.add(written(world, tags=[f"org:{org}"], sources=[fact, hidden_source]))
    if stored == "not derived":
        # As a writer that does not know the derived columns leaves them (their defaults).
        Entry.objects.update(depends=True, org_scope=SCOPE_MANY, rule_scope=SCOPE_MANY)
    else:
        assert Entry.objects.get(id=fact).rule_scope == f"{org} {own[0]}"
    assert seen_by_every_read(world, alice(world)) == shown


def test_an_entry_that_depends_on_none_is_decided_by_its_row(
    world: World, own: tuple[str, str]
) -> None:
    """A fact names no source entry: it is shown or hidden by its own row, and its closure (its
    own row only) is not read."""
    fact = written(world, tags=[f"org:{world.org.id}"], evidence=[own])
    assert Entry.objects.get(id=fact).depends is False
    assert seen_by_every_read(world, alice(world)) == {fact}
    Entry.objects.filter(id=fact).update(rule_scope=f"{world.org.id} person:u_somebody")
    assert seen_by_every_read(world, alice(world)) == set()
