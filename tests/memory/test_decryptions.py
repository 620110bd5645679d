"""[V8, S1, S2, S3, X3, Q1] Count what memory decrypts and encrypts.

The spy (`crypto`, tests.conftest) records the plain text of every encryption and decryption
while it is armed, through the real functions. What
is counted: every encryption or decryption of any encrypted field in this process during the
measured call — entry content *and* change-log payloads [E7], which are encrypted JSON.

- Reads (GET memory, `context`, `has_entries`, `validate_references`, the log) encrypt nothing
  and decrypt exactly the content of the entries they return, and nothing else: not the
  entries around them, and not the log payloads.
- Tag and status changes decrypt nothing and never encrypt entry content [X3]. Each committed
  change encrypts exactly one value: its own change-log payload, JSON naming the operation and
  the ids (no content); a purge also blanks the payloads of the changes that named the purged
  entries, which stores '' and encrypts nothing.
"""

import json
import time

import pytest

from memory.access import Reader, visible_entries
from memory.forgetting import entries_forget_mine, entry_forget, pool_purge
from memory.models import Change, Entry
from memory.selectors import context, has_entries, validate_references
from memory.services import (
    ItemEvidence,
    entry_create_in,
    entry_remember,
    entry_set_status_in,
    entry_topics_in,
    pool_change,
    topic_rename_in,
)
from openbot.errors import Conflict
from tests.conftest import Actor, CryptoSpy, World


def reader(world: World, actor: Actor) -> Reader:
    return Reader.person(
        bot=world.bot, person_id=actor.person.id, organization_id=actor.organization.id
    )


def pin(world: World, actor: Actor, content: str, topics: list[str] | None = None) -> Entry:
    # Distinct updatedAt values make memory order [E6] follow creation, newest first.
    time.sleep(0.002)
    return entry_remember(
        pool_id=world.bot.id,
        person_id=actor.person.id,
        organization_id=actor.organization.id,
        content=content,
        topics=topics or [],
    )


def group_fact(world: World, said_by: Actor, content: str, topics: list[str] = ()) -> Entry:  # type: ignore[assignment]
    """A fact from the channel's group chat: for the channel, evidence `channel:<c>`."""
    channel, org = world.channel.id, world.org.id
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.FACT,
            content=content,
            tags=[
                f"from:{said_by.person.id}",
                f"for:channel:{channel}",
                f"org:{org}",
                "chat:chat_group",
                f"channel:{channel}",
                *topics,
            ],
            source_items=[("chat_group", 1)],
            evidence=[ItemEvidence("chat_group", 1, f"channel:{channel}", org)],
        )


def conclusion(world: World, sources: list[Entry], content: str) -> Entry:
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.OBSERVATION,
            content=content,
            tags=[f"for:channel:{world.channel.id}", f"org:{world.org.id}", "chat:chat_group"],
            source_entries=[source.id for source in sources],
            confidence=0.8,
        )


@pytest.fixture
def pool(world: World) -> dict[str, Entry]:
    """Entries for alice, for bob only, for the channel, and in another organization."""
    entries = {
        "alice_note": pin(world, world.alice, "alice note: the plant needs water", ["home"]),
        "alice_other": pin(world, world.alice, "alice other: renew the passport"),
        "bob_note": pin(world, world.bob, "bob note: secret for bob only", ["home"]),
        "group": group_fact(world, world.carol, "group fact: the team meets on Monday"),
    }
    entries["conclusion"] = conclusion(
        world, [entries["group"]], "conclusion: Mondays are for planning"
    )
    entries["dave_note"] = entry_remember(
        pool_id=world.other_bot.id,
        person_id=world.dave.person.id,
        organization_id=world.other_org.id,
        content="dave note: another organization",
        topics=[],
    )
    return entries


# --- Reads ----------------------------------------------------------------------------------


def test_get_memory_decrypts_only_the_returned_entries(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    client = world.alice.client()
    crypto.arm()
    response = client.get(f"/v1/bots/{world.bot.id}/memory")
    assert response.status_code == 200
    returned = [entry["content"] for entry in response.json()["entries"]]
    assert len(returned) == 4  # her two notes, the group fact, the conclusion
    assert sorted(crypto.decrypted) == sorted(returned)
    assert crypto.encrypted == []


def test_get_memory_with_tags_decrypts_only_the_matching_entries(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    client = world.alice.client()
    crypto.arm()
    response = client.get(f"/v1/bots/{world.bot.id}/memory?tags=home")
    assert [entry["id"] for entry in response.json()["entries"]] == [pool["alice_note"].id]
    assert crypto.decrypted == ["alice note: the plant needs water"]


def test_get_memory_of_a_reader_who_sees_nothing_decrypts_nothing(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    entry_forget(
        pool_id=world.bot.id, reader=reader(world, world.bob), entry_id=pool["bob_note"].id
    )
    crypto.arm()
    response = world.bob.client().get(f"/v1/bots/{world.bot.id}/memory")
    assert response.json()["entries"] == []
    assert crypto.decrypted == []


def test_the_log_decrypts_no_payload(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    crypto.arm()
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory/log")
    assert response.status_code == 200
    assert response.json()["changes"]
    assert crypto.decrypted == []
    assert crypto.encrypted == []


def test_context_stops_at_the_first_entry_that_does_not_fit(
    world: World, crypto: CryptoSpy
) -> None:
    oldest = pin(world, world.alice, "short one")
    pin(world, world.alice, "long " * 100)
    second = pin(world, world.alice, "short two")
    newest = pin(world, world.alice, "short three")
    # Memory order is newest first: short three, short two, long, short one. The long entry
    # does not fit in 60 characters; "short one" after it would, but context stops there.
    crypto.arm()
    result = context(world.bot, reader(world, world.alice), limit=60)
    assert result.entry_ids == [newest.id, second.id]
    assert result.text == "- short three\n- short two\n"
    assert sorted(crypto.decrypted) == ["short three", "short two"]
    assert oldest.id not in result.entry_ids
    assert crypto.encrypted == []


def test_context_decrypts_nothing_when_the_first_entry_does_not_fit(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    crypto.arm()
    result = context(world.bot, reader(world, world.alice), limit=5)
    assert result.entry_ids == []
    assert result.text == ""
    assert crypto.decrypted == []


def test_context_over_many_entries_decrypts_exactly_those_returned(
    world: World, crypto: CryptoSpy
) -> None:
    # More entries than one batch of the context query; bob's entries never count.
    for n in range(45):
        entry_remember(
            pool_id=world.bot.id,
            person_id=world.alice.person.id,
            organization_id=world.org.id,
            content=f"alice entry {n:02d}",
            topics=[],
        )
        entry_remember(
            pool_id=world.bot.id,
            person_id=world.bob.person.id,
            organization_id=world.org.id,
            content=f"bob entry {n:02d}",
            topics=[],
        )
    alice = reader(world, world.alice)
    order = list(
        visible_entries(pool_id=world.bot.id, reader=alice, active_only=True).values_list(
            "id", flat=True
        )
    )
    # Each line is "- alice entry NN\n": 17 characters; 41 of them fit in 700.
    crypto.arm()
    result = context(world.bot, alice, limit=700)
    assert result.entry_ids == order[:41]
    assert len(crypto.decrypted) == 41
    assert all(text.startswith("alice entry") for text in crypto.decrypted)
    crypto.arm()
    everything = context(world.bot, alice, limit=100_000)
    assert everything.entry_ids == order
    assert len(crypto.decrypted) == 45


def test_has_entries_decrypts_nothing(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    crypto.arm()
    assert has_entries(world.bot, reader(world, world.alice))
    assert has_entries(
        world.bot, Reader.circle(channel_id=world.channel.id, organization_id=world.org.id)
    )
    # Visible even though nothing fits in a limit [S2].
    assert context(world.bot, reader(world, world.alice), limit=1).entry_ids == []
    assert not has_entries(world.other_bot, reader(world, world.alice))
    assert crypto.decrypted == []
    assert crypto.encrypted == []


def test_validate_references_decrypts_nothing(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    alice = reader(world, world.alice)
    crypto.arm()
    assert validate_references(world.bot, alice, [pool["conclusion"].id, pool["alice_note"].id])
    assert not validate_references(world.bot, alice, [pool["bob_note"].id])
    assert crypto.decrypted == []
    assert crypto.encrypted == []


# --- Changes of tags and status [X3] ------------------------------------------------------


def assert_only_log_payloads(crypto: CryptoSpy, pool: dict[str, Entry], versions: int) -> None:
    """Nothing decrypted; exactly one encryption per new version, its log payload [E7]."""
    crypto.armed = False
    assert crypto.decrypted == []
    assert len(crypto.encrypted) == versions
    for payload in crypto.encrypted:
        assert isinstance(json.loads(payload), list)
        for entry in pool.values():
            assert entry.content not in payload


def test_topic_changes_touch_no_content(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    crypto.arm()
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry_topics_in(change, entry_id=pool["group"].id, add=["meetings"], remove=[])
        renamed = topic_rename_in(change, old="home", new="household")
    assert renamed == 2  # alice's and bob's notes, whoever can see them
    assert_only_log_payloads(crypto, pool, versions=1)


def test_status_changes_touch_no_content(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    crypto.arm()
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=pool["group"].id, status=Entry.Status.INVALIDATED)
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=pool["alice_other"].id, status=Entry.Status.RETRACTED)
    assert_only_log_payloads(crypto, pool, versions=2)


def test_forget_touches_no_content(world: World, pool: dict[str, Entry], crypto: CryptoSpy) -> None:
    crypto.arm()
    # alice is the only person behind her note: it is retracted.
    entry_forget(
        pool_id=world.bot.id, reader=reader(world, world.alice), entry_id=pool["alice_note"].id
    )
    # carol said the group fact, alice only saw it: alice is excluded, the fact stays.
    entry_forget(pool_id=world.bot.id, reader=reader(world, world.alice), entry_id=pool["group"].id)
    # Not for her: refused, and still nothing read.
    with pytest.raises(Conflict):
        entry_forget(
            pool_id=world.bot.id, reader=reader(world, world.alice), entry_id=pool["bob_note"].id
        )
    assert_only_log_payloads(crypto, pool, versions=2)
    assert Entry.objects.get(id=pool["alice_note"].id).status == Entry.Status.RETRACTED


def test_forget_mine_touches_no_content(
    world: World, pool: dict[str, Entry], crypto: CryptoSpy
) -> None:
    """[D2, X3] Forgetting everything reads tags and evidence only; one log payload."""
    crypto.arm()
    done = entries_forget_mine(pool_id=world.bot.id, reader=reader(world, world.alice))
    # Her two notes; carol said the group fact, alice is not behind it.
    assert (done.retracted, done.excluded) == (2, 0)
    assert_only_log_payloads(crypto, pool, versions=1)


def test_purge_touches_no_content(world: World, pool: dict[str, Entry], crypto: CryptoSpy) -> None:
    crypto.arm()
    assert pool_purge(pool_id=world.bot.id, tag=f"from:{world.carol.person.id}") == 1
    assert pool_purge(pool_id=world.bot.id, tag="chat:chat_group") == 1  # the conclusion
    assert pool_purge(pool_id=world.bot.id, tag="chat:nothing-here") == 0
    # Three purges, each logged; the payloads of the purged entries' changes are blanked to
    # '' (nothing encrypted for that).
    assert_only_log_payloads(crypto, pool, versions=3)
    assert not Entry.objects.filter(id__in=[pool["group"].id, pool["conclusion"].id]).exists()
