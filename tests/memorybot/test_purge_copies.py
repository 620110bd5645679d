"""[P4, P3, A4, A6] A purge removes every readable copy of what it removes, and deleting a
chat's history blanks that chat's model calls.

Canary texts go through turns over HTTP (the bot confides), enrichment and learning, with the
bot's model and the memory bot on the fake OpenAI-compatible server. Afterwards every
encrypted column of every table (found through the models, so a new encrypted column is
searched too) is decrypted and searched for them.
"""

import io
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db.models import Sum

from chats.models import Item, Turn
from conversations.turns import turn_run
from memory.models import Entry, EntrySource
from memory.services import ImportedEntry, ItemEvidence, entries_import
from memorybot.learning import learning_run_process
from memorybot.learning_step import LEARNING_CONTEXT_SIZE
from memorybot.models import (
    Confession,
    Enrichment,
    EnrichmentEntry,
    LearningRun,
    ModelCall,
    ModelCallEntry,
)
from memorybot.purge import memory_purge
from openbot import ids
from openbot.fields import EncryptedTextField
from tests.conftest import Actor, World
from tests.factories import ChatFactory, EntryFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact
from tests.memorybot.learning_world import (
    fact_change,
    learning_answer,
    observation_change,
    person_item,
)
from tests.memorybot.scenes import (
    FAKE_MODEL,
    bot_model_set,
    call_carrying,
    chat_open,
    confide_call,
    enrichment_answer,
    memory_model_set,
    take_turn,
)

RUN = uuid.uuid4().hex[:12]


def mark(name: str) -> str:
    """A distinctive canary text of this test run."""
    return f"canary-{name}-{RUN}"


# Where each canary goes: `purged` is the chat that will be purged, `kept` another chat of
# alice's whose memory bot is shown what was learned in `purged`.
ITEM = mark("item")  # alice's words in the purged chat
CONFESSION = mark("confession")  # what the bot confides there
PRIEST = mark("priest")  # the memory bot's reply to it
REPLY = mark("reply")  # the bot's answer there
FACT = mark("fact")  # learned from alice's words there
ENRICHED = mark("enriched")  # her next input there, rewritten with the fact
ENRICHED_ELSEWHERE = mark("enriched-elsewhere")  # an input of the kept chat rewritten with it
OBSERVATION = mark("observation")  # concluded, in the kept chat, from the fact
FROM_PURGED = [ITEM, CONFESSION, PRIEST, REPLY, FACT, ENRICHED, ENRICHED_ELSEWHERE, OBSERVATION]
# What the kept chat has of its own: it stays.
KEPT_ITEM = mark("kept-item")
KEPT_REPLY = mark("kept-reply")
KEPT_FACT = mark("kept-fact")


Location = tuple[str, str, Any]  # (model label, field, primary key)


def encrypted_values() -> list[tuple[Location, str]]:
    """Every value of every encrypted column of every model, decrypted."""
    values: list[tuple[Location, str]] = []
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if not isinstance(field, EncryptedTextField):
                continue
            for pk, value in model._default_manager.values_list("pk", field.name):
                if value:
                    values.append(((model._meta.label, field.name, pk), value))
    return values


def where(text: str) -> set[Location]:
    return {location for location, value in encrypted_values() if text in value}


def tables(locations: set[Location]) -> set[str]:
    return {label for label, _, _ in locations}


@dataclass
class Scene:
    world: World
    purged: str
    kept: str
    fact: str
    observation: str
    kept_fact: str


def turn(actor: Actor, chat_id: str, text: str) -> dict[str, Any]:
    return take_turn(actor, chat_id, text)


def learn(fake: FakeOpenAI, turn_body: dict[str, Any], changes: list[dict[str, Any]]) -> None:
    """The run the confided turn stored learns `changes` (the model's answer), in-process."""
    run = LearningRun.objects.get(turn_id=turn_body["turn"]["id"])
    learning_answer(fake, changes)
    learning_run_process(run_id=run.id)
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE and run.refusals == [], run.refusals


def said(turn_body: dict[str, Any]) -> Item:
    """The person's item of a turn taken over HTTP."""
    return person_item(Turn.objects.get(pk=turn_body["turn"]["id"]))


def entry_with(text: str) -> str:
    (entry_id,) = [entry.id for entry in Entry.objects.all() if text in entry.content]
    return entry_id


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> Scene:
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    alice = world.alice
    purged = chat_open(alice, world.bot)
    kept = chat_open(alice, world.bot)

    # The purged chat, turn 1: no entries yet (no enrichment); the bot confides.
    fake_openai.reply(**confide_call(f"Did I get the shed right? {CONFESSION}"))
    fake_openai.reply(content=f"Listen, it is fine. {PRIEST}")
    fake_openai.reply(content=f"Noted. {REPLY}")
    first = turn(alice, purged, f"My bike is in the blue shed. {ITEM}")
    learn(fake_openai, first, [fact_change(f"alice keeps her bike in a shed {FACT}", said(first))])
    fact_id = entry_with(FACT)

    # Turn 2: her input is rewritten with the fact.
    fake_openai.reply(content=enrichment_answer(f"Where do I park? {ENRICHED}", [fact_id]))
    fake_openai.reply(content="In the shed.")
    turn(alice, purged, "Where should I park my bike tonight?")

    # The kept chat: an input rewritten with the fact; learning is shown the fact and
    # concludes from it, and learns a fact of the kept chat's own.
    fake_openai.reply(content=enrichment_answer(f"Kayak? {ENRICHED_ELSEWHERE}", [fact_id]))
    fake_openai.reply(**confide_call("I was unsure about the kayak."))
    fake_openai.reply(content="That is all right.")
    fake_openai.reply(content=f"A kayak, then. {KEPT_REPLY}")
    third = turn(alice, kept, f"I also own a red kayak. {KEPT_ITEM}")
    learn(
        fake_openai,
        third,
        [
            fact_change(f"alice owns a red kayak {KEPT_FACT}", said(third)),
            observation_change(f"alice cares for her things {OBSERVATION}", fact_id),
        ],
    )
    return Scene(
        world=world,
        purged=purged,
        kept=kept,
        fact=fact_id,
        observation=entry_with(OBSERVATION),
        kept_fact=entry_with(KEPT_FACT),
    )


def purge(world: World, tag: str) -> dict[str, Any]:
    response = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge", {"tag": tag}, format="json"
    )
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    return body


def test_a_chat_purge_leaves_no_readable_copy_of_what_it_removed(scene: Scene) -> None:
    # Before: the model calls and enrichments hold copies of what came from the chat.
    assert tables(where(FACT)) == {"memory.Entry", "memory.Change", "memorybot.ModelCall"}
    assert tables(where(ENRICHED_ELSEWHERE)) == {"memorybot.Enrichment", "memorybot.ModelCall"}
    assert "memorybot.ModelCall" in tables(where(ITEM))
    assert "memorybot.ModelCall" in tables(where(OBSERVATION))
    calls = ModelCall.objects.count()
    cost = ModelCall.objects.aggregate(total=Sum("cost_micros"))["total"]

    assert purge(scene.world, f"chat:{scene.purged}") == {"removed": 2}

    # [P3] The chat's own items and confessions stay; nothing else holds what came from it.
    allowed = {
        ("chats.Item", "text", pk)
        for pk in Item.objects.filter(chat_id=scene.purged).values_list("pk", flat=True)
    }
    allowed |= {
        ("memorybot.Confession", name, pk)
        for pk in Confession.objects.filter(chat_id=scene.purged).values_list("pk", flat=True)
        for name in ("text", "reply")
    }
    for canary in FROM_PURGED:
        assert where(canary) <= allowed, (canary, where(canary) - allowed)
    assert tables(where(ITEM)) == {"chats.Item"}
    assert tables(where(CONFESSION)) == {"memorybot.Confession"}
    assert not Entry.objects.filter(id__in=[scene.fact, scene.observation]).exists()
    # The kept chat keeps its own: its words, and what was learned from them.
    assert "chats.Item" in tables(where(KEPT_ITEM))
    assert "memory.Entry" in tables(where(KEPT_FACT))
    # [P4] Blanked calls keep their row: usage, cost, purpose, status stay.
    assert ModelCall.objects.count() == calls
    assert ModelCall.objects.aggregate(total=Sum("cost_micros"))["total"] == cost
    blanked = ModelCall.objects.filter(blanked_at__isnull=False)
    assert (
        blanked.filter(chat_id=scene.purged).count()
        == ModelCall.objects.filter(chat_id=scene.purged).count()
    )
    assert set(blanked.values_list("purpose", flat=True)) == {
        "answer",
        "confide",
        "enrichment",
        "learning",
    }
    assert all(call.request == "" and call.result == "" for call in blanked)
    assert not ModelCallEntry.objects.filter(call__in=blanked).exists()


def test_deleting_a_chats_history_blanks_its_model_calls(scene: Scene) -> None:
    alice = scene.world.alice
    items = alice.client().get(f"/v1/chats/{scene.kept}/items").json()["items"]
    texts = [item["text"] for item in items]
    assert KEPT_ITEM in " ".join(texts) and KEPT_REPLY in " ".join(texts)
    assert any("memorybot.ModelCall" in tables(where(text)) for text in texts)

    assert alice.client().delete(f"/v1/chats/{scene.kept}/items").status_code == 204

    calls = [
        (location, value)
        for location, value in encrypted_values()
        if location[0] == "memorybot.ModelCall"
    ]
    for text in texts:
        assert not [location for location, value in calls if text in value], text
    # Its learning call included; the other chat's calls keep theirs [P3: memory stays].
    assert ModelCall.objects.filter(chat_id=scene.kept, purpose="learning").get().blanked_at
    assert "memorybot.ModelCall" in tables(where(ITEM))
    assert "memory.Entry" in tables(where(KEPT_FACT))


def test_a_purge_decrypts_nothing(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """[A4, P4] The copies are found by their plain metadata, never by reading them."""

    def refuse(tokens: Sequence[str]) -> list[str | None]:
        raise AssertionError("the purge decrypted a value")

    # Every decryption goes through it, `decrypt` too.
    monkeypatch.setattr("openbot.fields.decrypt_all", refuse)

    assert purge(scene.world, f"org:{scene.world.org.id}") == {"removed": 3}

    assert not ModelCall.objects.filter(blanked_at__isnull=True).exists()
    assert not Enrichment.objects.exists()


def test_the_command_removes_the_copies_too(scene: Scene) -> None:
    out = io.StringIO()
    call_command(
        "purge_memory", "--bot", scene.world.bot.id, "--tag", f"chat:{scene.purged}", stdout=out
    )

    assert json.loads(out.getvalue()) == {"removed": 2}
    for canary in (FACT, ENRICHED_ELSEWHERE, OBSERVATION):
        assert tables(where(canary)) == set(), canary


# --- enrichments [A6] -----------------------------------------------------------------------


def enrichments(actor: Actor, chat_id: str) -> list[dict[str, Any]]:
    response = actor.client().get(f"/v1/chats/{chat_id}/enrichments")
    assert response.status_code == 200
    listed: list[dict[str, Any]] = response.json()["enrichments"]
    return listed


def test_enrichments_made_from_a_purged_entry_are_no_longer_listed(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    alices_pin = EntryFactory.create(
        author=world.alice, bot=world.bot, content=f"alice's dog is called Fennel {mark('pin')}"
    )
    bobs_pin = EntryFactory.create(
        author=world.bob, bot=world.bot, content="bob's dog is called Rex"
    )
    alices_chat = chat_open(world.alice, world.bot)
    bobs_chat = chat_open(world.bob, world.bot)
    fake_openai.reply(content=enrichment_answer("Walk Fennel where?", [alices_pin.id]))
    fake_openai.reply(content="By the lake.")
    turn(world.alice, alices_chat, "Where should I walk the dog?")
    fake_openai.reply(content=enrichment_answer("Walk Rex where?", [bobs_pin.id]))
    fake_openai.reply(content="In the park.")
    turn(world.bob, bobs_chat, "Where should I walk the dog?")
    assert [item["entries"] for item in enrichments(world.alice, alices_chat)] == [[alices_pin.id]]
    assert [item["entries"] for item in enrichments(world.bob, bobs_chat)] == [[bobs_pin.id]]

    assert purge(world, f"from:{world.alice.person.id}") == {"removed": 1}

    assert enrichments(world.alice, alices_chat) == []
    assert [item["entries"] for item in enrichments(world.bob, bobs_chat)] == [[bobs_pin.id]]
    assert not EnrichmentEntry.objects.filter(entry_id=alices_pin.id).exists()


# --- which calls a tag names [P4] -----------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "blanked"),
    [
        ("chat:alices", {"alices"}),
        ("channel:", {"group"}),
        ("from:carol", {"group"}),
        ("from:alice", {"alices", "group"}),
        ("from:bob", {"bobs"}),
        ("org:", {"alices", "group", "bobs"}),
    ],
)
def test_a_purge_blanks_the_calls_of_the_chats_its_tag_names(
    world: World, fake_openai: FakeOpenAI, tag: str, blanked: set[str]
) -> None:
    """The chats' calls carry their items (the input, the history, the learning items):
    `chat:` its own, `channel:` the channel's chats, `from:` every chat the person took a turn
    in, `org:` the organization's. Another bot's calls are never touched."""
    bot_model_set(world.bot, FAKE_MODEL)
    bot_model_set(world.other_bot, FAKE_MODEL)
    chats = {
        "alices": chat_open(world.alice, world.bot),
        "group": chat_open(world.alice, world.bot, channel=world.channel.id),
        "bobs": chat_open(world.bob, world.bot),
        "daves": chat_open(world.dave, world.other_bot),
    }
    turn(world.alice, chats["alices"], "hello")
    turn(world.carol, chats["group"], "hello all")
    turn(world.alice, chats["group"], "hello carol")
    turn(world.bob, chats["bobs"], "hi")
    turn(world.dave, chats["daves"], "hey")
    kind, _, name = tag.partition(":")
    if kind == "chat":
        tag = f"chat:{chats[name]}"
    elif kind == "from":
        tag = f"from:{world.actor(name).person.id}"
    else:
        tag += world.channel.id if kind == "channel" else world.org.id

    assert purge(world, tag) == {"removed": 0}

    blank = ModelCall.objects.filter(blanked_at__isnull=False)
    assert set(blank.values_list("chat_id", flat=True)) == {chats[name] for name in blanked}
    assert set(
        ModelCall.objects.filter(blanked_at__isnull=True).values_list("chat_id", flat=True)
    ) == {chats[name] for name in set(chats) - blanked}
    assert all((call.request, call.result) == ("", "") for call in blank)


# --- a purge while a call runs [P4] ---------------------------------------------------------


def test_a_call_that_carried_an_entry_purged_while_it_ran_is_recorded_blank(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The call is recorded when it ends: if an entry it carried was purged meanwhile, the
    purge could not find it, so it is recorded blank (usage and cost still billed), and its
    answer, which may carry what was purged, is not used."""
    secret = mark("secret")
    gone = EntryFactory.create(author=world.alice, bot=world.bot, content=secret)

    memory_purge(pool_id=world.bot.id, tag=f"from:{world.alice.person.id}")
    fake_openai.reply(content=f"I see: {secret}", usage=(1000, 500))
    late = call_carrying(world.alice, world.bot, gone)
    fresh = EntryFactory.create(author=world.alice, bot=world.bot, content="alice likes green tea")
    recorded = call_carrying(world.alice, world.bot, fresh)

    assert late.status == "ok" and late.result is None
    assert recorded.result is not None
    row = ModelCall.objects.get(pk=late.call_id)
    assert (row.request, row.result) == ("", "")
    assert row.blanked_at is not None and row.cost_micros == 450 and row.billed
    assert not ModelCallEntry.objects.filter(call_id=late.call_id).exists()
    assert list(
        ModelCallEntry.objects.filter(call_id=recorded.call_id).values_list("entry_id", flat=True)
    ) == [fresh.id]
    assert ModelCall.objects.get(pk=recorded.call_id).blanked_at is None
    assert tables(where(secret)) == set()


# --- what a learning answer created [P4] ----------------------------------------------------


def test_a_learning_answer_is_blanked_with_the_entries_it_created(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """A learning step may conclude from an entry it was not shown (valid, but not among the
    300 of its context [W5]); its answer holds the conclusion, which goes with that entry."""
    memory_model_set(world.org, FAKE_MODEL)
    alice = world.alice.person.id
    source = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot), person=world.alice.person
            )
        ],
        content=mark("source"),
    )
    newer = [
        ImportedEntry(
            id=ids.new_id("mem"),
            layer=Entry.Layer.PINNED,
            content=f"pin {number}",
            tags=[f"from:{alice}", f"for:person:{alice}", f"org:{world.org.id}"],
            evidence=[
                ItemEvidence(
                    chat_id="", item_seq=0, rule=f"person:{alice}", organization_id=world.org.id
                )
            ],
        )
        for number in range(LEARNING_CONTEXT_SIZE)
    ]
    entries_import(pool_id=world.bot.id, entries=newer)
    # The bot keeps the offline model: it confides once per turn, so the turn stores a run.
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    confided = turn_run(chat=chat, person=world.alice.person, text="I like old bikes.").turn
    concluded = mark("concluded")
    learning_answer(
        fake_openai, [observation_change(f"alice likes old things {concluded}", source.id)]
    )
    learning_run_process(run_id=LearningRun.objects.get(turn=confided).id)
    learning = ModelCall.objects.get(purpose="learning")
    assert source.id not in learning.request and concluded in learning.result
    source_chat = EntrySource.objects.get(entry=source).chat_id

    assert purge(world, f"chat:{source_chat}") == {"removed": 2}

    assert tables(where(concluded)) == set()
    assert ModelCall.objects.get(pk=learning.pk).blanked_at is not None
