"""[O6] `manage.py explain_access`: visible or not, and the first failing [V4] clause on the
entry and each entry it depends on — agreeing with the access module, never reading content."""

import io
import json
import os
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from hypothesis import event, given
from hypothesis import strategies as st

from memory.access import Reader
from memory.explain import explain_access, explain_entries
from memory.forgetting import entry_forget
from memory.models import Change, Entry
from memory.services import (
    ImportedEntry,
    ItemEvidence,
    entries_import,
    entry_create_in,
    pool_change,
)
from openbot import services
from openbot.models import Bot
from tests.conftest import Actor, CryptoSpy, World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation, set_status
from tests.memory.test_access_property import (
    PoolModel,
    RefReader,
    Tenancy,
    make_tenancy,
    random_pool,
    random_pools,
)

EXAMPLES_ENV = "OPENBOT_EXPLAIN_EXAMPLES"


def explain(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("explain_access", *args, stdout=out)
    text = out.getvalue()
    result: dict[str, Any] = json.loads(text)
    assert text.strip() == json.dumps(result), "exactly one JSON object"
    return result


def failing(result: dict[str, Any]) -> dict[str, str | None]:
    """entry id -> its first failing clause."""
    return {row["entry"]: row["failing"] for row in result["dependencies"]}


# --- Agreement with the access module over the property test's random pools --------------


@pytest.fixture
def tenancy(db: Any) -> Tenancy:
    return make_tenancy()


def bot_and_reader(world: Tenancy, ref: RefReader) -> tuple[Bot, list[str]]:
    bot = world.bot_of(ref.organization)
    if ref.person is not None:
        return bot, ["--person", ref.person]
    return bot, ["--channel", str(ref.circle)]


def check_explanations(world: Tenancy, model: PoolModel, data: st.DataObject) -> None:
    entry_ids = sorted(model.entries)
    for ref_reader, reader in world.readers():
        for active_only in (False, True):
            # [V4] read literally by the property test's reference
            seen = model.visible(ref_reader, active_only=active_only)
            explanations = explain_entries(
                pool_id=world.bot.id, reader=reader, entry_ids=entry_ids, active_only=active_only
            )
            for explanation in explanations:
                clauses = [row.failing for row in explanation.dependencies]
                context = (ref_reader, active_only, explanation.to_json())
                assert explanation.visible == (explanation.entry_id in seen), context
                # Visible exactly when no entry it depends on fails a clause.
                assert explanation.visible == all(c is None for c in clauses), context
                assert explanation.dependencies[0].entry_id == explanation.entry_id
                for clause in clauses:
                    if clause is not None:
                        event(f"clause {clause.split(':')[0]}")
    # The command prints the same explanation (one reader, entry and use per example).
    if entry_ids:
        ref_reader, reader = data.draw(st.sampled_from(world.readers()))
        entry_id = data.draw(st.sampled_from(entry_ids))
        active_only = data.draw(st.booleans())
        bot, who = bot_and_reader(world, ref_reader)
        printed = explain(
            "--bot", bot.id, *who, "--entry", entry_id, *(["--active"] if active_only else [])
        )
        expected = explain_access(
            pool_id=world.bot.id, reader=reader, entry_id=entry_id, active_only=active_only
        )
        assert printed == {"bot": bot.id, "pool": world.bot.id, **expected.to_json()}


@random_pools(int(os.environ.get(EXAMPLES_ENV) or 200))
@given(data=st.data())
def test_explain_access_agrees_with_the_access_module(
    tenancy: Tenancy, data: st.DataObject
) -> None:
    with transaction.atomic():
        model = random_pool(tenancy, data)
        check_explanations(tenancy, model, data)
        transaction.set_rollback(True)


# --- Each clause, by name -------------------------------------------------------------------


def person_args(world: World, bot: Bot, actor: Actor, entry: str, *more: str) -> dict[str, Any]:
    return explain("--bot", bot.id, "--person", actor.person.id, "--entry", entry, *more)


def private_fact(world: World, actor: Actor) -> Entry:
    return fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=actor, bot=world.bot), person=actor.person
            )
        ]
    )


def group_fact(world: World) -> Entry:
    """carol says it in the group chat of the channel (alice and carol)."""
    return fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel),
                person=world.carol.person,
            )
        ]
    )


def test_a_visible_entry_fails_no_clause(world: World, crypto: CryptoSpy) -> None:
    entry = private_fact(world, world.alice)
    crypto.arm()
    result = person_args(world, world.bot, world.alice, entry.id)
    assert result == {
        "bot": world.bot.id,
        "pool": world.bot.id,
        "entry": entry.id,
        "reader": {"organization": world.org.id, "person": world.alice.person.id},
        "use": "read",
        "visible": True,
        "dependencies": [
            {"entry": entry.id, "via": None, "layer": "fact", "status": "active", "failing": None}
        ],
    }
    # [V8] It reads metadata only.
    assert crypto.decrypted == [] and crypto.encrypted == []


def test_clause_excluded_for_the_person_and_for_the_group(world: World) -> None:
    entry = group_fact(world)
    alice = Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )
    entry_forget(pool_id=world.bot.id, reader=alice, entry_id=entry.id)
    mine = person_args(world, world.bot, world.alice, entry.id)
    assert (mine["visible"], failing(mine)) == (False, {entry.id: "excluded"})
    # [V10] alice is a current member of the channel: the group reads her answer too.
    group = explain("--bot", world.bot.id, "--channel", world.channel.id, "--entry", entry.id)
    assert group["reader"] == {"organization": world.org.id, "channel": world.channel.id}
    assert (group["visible"], failing(group)) == (False, {entry.id: "excluded"})
    carol = person_args(world, world.bot, world.carol, entry.id)
    assert (carol["visible"], failing(carol)) == (True, {entry.id: None})


def test_clause_org(world: World) -> None:
    """dave reads the shared bot in his own organization; the entry is org A's [E3]."""
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    services.grant_set(bot=linked, level="read", organization=world.other_org)
    entry = private_fact(world, world.alice)
    result = person_args(world, linked, world.dave, entry.id)
    assert result["pool"] == world.bot.id
    assert result["reader"] == {"organization": world.other_org.id, "person": world.dave.person.id}
    assert (result["visible"], failing(result)) == (False, {entry.id: "org"})


def test_clause_not_admitted(world: World) -> None:
    entry = private_fact(world, world.alice)
    result = person_args(world, world.bot, world.bob, entry.id)
    assert (result["visible"], failing(result)) == (False, {entry.id: "not_admitted"})


def test_clause_evidence_names_the_rule_the_reader_does_not_satisfy(world: World) -> None:
    """For everyone who uses the bot, but from the channel's chat: bob is not in the channel."""
    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        entry = entry_create_in(
            change,
            layer=Entry.Layer.FACT,
            content="widened wrongly",
            tags=["for:bot", f"org:{world.org.id}"],
            source_items=[("chat_x", 1)],
            evidence=[ItemEvidence("chat_x", 1, f"channel:{world.channel.id}", world.org.id)],
        )
    bob = person_args(world, world.bot, world.bob, entry.id)
    expected = {entry.id: f"evidence:channel:{world.channel.id}"}
    assert (bob["visible"], failing(bob)) == (False, expected)
    carol = person_args(world, world.bot, world.carol, entry.id)
    assert (carol["visible"], failing(carol)) == (True, {entry.id: None})


def test_clause_missing_evidence(world: World) -> None:
    entries_import(
        pool_id=world.bot.id,
        entries=[
            ImportedEntry(
                id="mem_unproven",
                layer=Entry.Layer.FACT,
                content="from an older version",
                tags=[f"org:{world.org.id}", f"for:person:{world.alice.person.id}"],
                source_items=[("chat_old", 1)],
            )
        ],
    )
    result = person_args(world, world.bot, world.alice, "mem_unproven")
    assert (result["visible"], failing(result)) == (False, {"mem_unproven": "missing_evidence"})


def test_clause_not_active_on_the_entry_and_on_a_source(world: World) -> None:
    source = group_fact(world)
    conclusion = observation([source], audience=f"for:channel:{world.channel.id}")
    set_status(source, Entry.Status.INVALIDATED)
    result = person_args(world, world.bot, world.carol, conclusion.id)
    assert result["visible"] is False
    assert result["dependencies"] == [
        {
            "entry": conclusion.id,
            "via": None,
            "layer": "observation",
            "status": "active",
            "failing": None,
        },
        {
            "entry": source.id,
            "via": conclusion.id,
            "layer": "fact",
            "status": "invalidated",
            "failing": "not_active",
        },
    ]
    # The invalidated entry itself is history [V6]: shown on GET memory, not in active use.
    history = person_args(world, world.bot, world.carol, source.id)
    assert (history["visible"], failing(history)) == (True, {source.id: None})
    active = person_args(world, world.bot, world.carol, source.id, "--active")
    assert active["use"] == "active"
    assert (active["visible"], failing(active)) == (False, {source.id: "not_active"})
    set_status(source, Entry.Status.RETRACTED)
    retracted = person_args(world, world.bot, world.carol, source.id)
    assert (retracted["visible"], failing(retracted)) == (False, {source.id: "not_active"})


def imported_observation(world: World, entry_id: str, sources: list[str]) -> ImportedEntry:
    return ImportedEntry(
        id=entry_id,
        layer=Entry.Layer.OBSERVATION,
        content="from an older version",
        tags=[f"org:{world.org.id}", "for:bot"],
        source_entries=sources,
        confidence=0.5,
    )


def test_clause_missing_source(world: World) -> None:
    kept = private_fact(world, world.alice)
    entries_import(
        pool_id=world.bot.id,
        entries=[
            imported_observation(world, "mem_over_gone", [kept.id, "mem_gone"]),
            imported_observation(world, "mem_over_nothing", []),
        ],
    )
    result = person_args(world, world.bot, world.alice, "mem_over_gone")
    assert result["visible"] is False
    assert [(row["entry"], row["via"], row["failing"]) for row in result["dependencies"]] == [
        ("mem_over_gone", None, None),
        (kept.id, "mem_over_gone", None),
        ("mem_gone", "mem_over_gone", "missing_source"),
    ]
    nothing = person_args(world, world.bot, world.alice, "mem_over_nothing")
    assert (nothing["visible"], failing(nothing)) == (False, {"mem_over_nothing": "missing_source"})


def test_clause_cycle(world: World) -> None:
    kept = private_fact(world, world.alice)
    entries_import(
        pool_id=world.bot.id,
        entries=[
            imported_observation(world, "mem_top", ["mem_loop_a"]),
            imported_observation(world, "mem_loop_a", ["mem_loop_b", kept.id]),
            imported_observation(world, "mem_loop_b", ["mem_loop_a"]),
        ],
    )
    result = person_args(world, world.bot, world.alice, "mem_top")
    assert (result["visible"], failing(result)) == (
        False,
        {"mem_top": None, "mem_loop_a": "cycle", "mem_loop_b": "cycle", kept.id: None},
    )


# --- The command's edges ------------------------------------------------------------------


def test_the_command_names_what_it_cannot_find(world: World) -> None:
    entry = private_fact(world, world.alice)
    alice = world.alice.person.id
    with pytest.raises(CommandError, match="--bot: no bot"):
        explain("--bot", "bot_nope", "--person", alice, "--entry", entry.id)
    with pytest.raises(CommandError, match="--person: no person"):
        explain("--bot", world.bot.id, "--person", "u_nope", "--entry", entry.id)
    with pytest.raises(CommandError, match="entry mem_nope not found"):
        explain("--bot", world.bot.id, "--person", alice, "--entry", "mem_nope")
    # An entry of another bot's pool is not found in this one.
    with pytest.raises(CommandError, match="not found"):
        explain("--bot", world.other_bot.id, "--person", alice, "--entry", entry.id)
    other_channel = services.channel_create(organization=world.other_org, members=[])
    with pytest.raises(CommandError, match="--channel: the channel is in another organization"):
        explain("--bot", world.bot.id, "--channel", other_channel.id, "--entry", entry.id)
    with pytest.raises(CommandError, match="--channel: no channel"):
        explain("--bot", world.bot.id, "--channel", "ch_nope", "--entry", entry.id)
    with pytest.raises(CommandError):
        explain("--bot", world.bot.id, "--entry", entry.id)
    with pytest.raises(CommandError):
        explain(
            "--bot",
            world.bot.id,
            "--person",
            alice,
            "--channel",
            world.channel.id,
            "--entry",
            entry.id,
        )
