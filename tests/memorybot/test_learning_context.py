"""[W5, W6, W8, V6, P3, B4, B6] What a learning run shows the model, what its changes reach,
when it learns nothing, and how it ends when its step runs too long or the budget is spent.
The model's answers come from the fake server over real HTTP."""

import io
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from pytest_django.fixtures import Settings

from chats.models import Chat, Turn
from memory import services as memory
from memory.models import Entry, EntryTag
from memorybot.learning import learning_run_process, runs_due
from memorybot.models import Confession, LearningRun, ModelCall
from memorybot.purge import memory_purge
from openbot import ids, services
from tests.conftest import Actor, World
from tests.factories import ChatFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact, set_status
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    flush_broker,
    learned,
    learning_answer,
    learning_prompt,
    learning_requests,
    learning_worker,
    memory_bot_on,
    observation_change,
    person_item,
    run_of,
    tags_of,
)

NOTE_LINE = re.compile(r"^\[(mem_[0-9a-f]+)\] \(([^)]*)\) ")


def shown_notes(prompt: str) -> list[str]:
    """The ids of the existing notes a learning prompt shows, in order."""
    section = prompt.split("Existing notes:\n", 1)[1].split("\n\nTopic counts:", 1)[0]
    return [match.group(1) for line in section.splitlines() if (match := NOTE_LINE.match(line))]


def shown_topic_counts(prompt: str) -> dict[str, int]:
    line = prompt.rsplit("Topic counts: ", 1)[1].strip()
    if line == "(none)":
        return {}
    return {topic: int(count) for topic, count in (part.split(": ") for part in line.split(", "))}


def private_fact(
    world: World, actor: Actor, n: int, *, topic: str, status: str = Entry.Status.ACTIVE
) -> memory.ImportedEntry:
    """A fact of `actor`'s private chat as an older version stored it, with provable access."""
    person, org = actor.person.id, actor.organization.id
    return memory.ImportedEntry(
        id=ids.new_id("mem"),
        layer=Entry.Layer.FACT,
        content=f"note {n} of {actor.person.name}",
        tags=[f"from:{person}", f"for:person:{person}", f"org:{org}", "chat:chat_old", topic],
        status=status,
        source_items=[("chat_old", n)],
        evidence=[
            memory.ItemEvidence(
                chat_id="chat_old", item_seq=n, rule=f"person:{person}", organization_id=org
            )
        ],
        updated_at=1_700_000_000_000 + n,
    )


@dataclass
class LargePool:
    visible: list[str]  # what alice may use, in memory order
    renamed: set[str]  # every entry of the pool with the topic `old-topic`


@pytest.fixture
def large_pool(world: World) -> LargePool:
    """362 entries: alice's 310 facts and 2 pins, bob's 20 facts, 10 invalidated facts of
    alice's, 10 observations whose source is missing, and 10 entries of another organization."""
    alices = [
        private_fact(world, world.alice, n, topic="old-topic" if n % 3 == 0 else "tea")
        for n in range(310)
    ]
    bobs = [private_fact(world, world.bob, 1000 + n, topic="old-topic") for n in range(20)]
    invalidated = [
        private_fact(world, world.alice, 2000 + n, topic="old-topic", status="invalidated")
        for n in range(10)
    ]
    unsound = [
        memory.ImportedEntry(
            id=ids.new_id("mem"),
            layer=Entry.Layer.OBSERVATION,
            content="a conclusion from a note that is gone",
            tags=[f"for:person:{world.alice.person.id}", f"org:{world.org.id}", "old-topic"],
            source_entries=["mem_purged"],
            confidence=0.5,
            updated_at=1_800_000_000_000,
        )
        for _ in range(10)
    ]
    elsewhere = [private_fact(world, world.dave, 3000 + n, topic="old-topic") for n in range(10)]
    memory.entries_import(
        pool_id=world.bot.id, entries=alices + bobs + invalidated + unsound + elsewhere
    )
    pins = [
        memory.entry_remember(
            pool_id=world.bot.id,
            person_id=world.alice.person.id,
            organization_id=world.org.id,
            content=f"pinned {n}",
            topics=["pin"],
        ).id
        for n in range(2)
    ]
    # Memory order [E6]: pinned first, then updatedAt descending, then id ascending.
    order = Entry.objects.filter(id__in=pins + [entry.id for entry in alices])
    visible = [
        entry_id
        for _, _, entry_id in sorted(
            (rank, -updated_at, entry_id)
            for entry_id, rank, updated_at in order.values_list("id", "rank", "updated_at")
        )
    ]
    renamed = {
        entry.id
        for entry in alices + bobs + invalidated + unsound + elsewhere
        if "old-topic" in entry.tags
    }
    return LargePool(visible=visible, renamed=renamed)


def test_the_context_is_the_first_300_valid_entries_the_readers_may_see(
    world: World, fake_openai: FakeOpenAI, large_pool: LargePool
) -> None:
    """[W5, V7] The first 300 in memory order, of what the run's readers may see; topic counts
    over every valid entry of the organization — bob's count, the invalidated, the unsound
    and the other organization's do not."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "Which tea did I like?")
    learning_answer(fake_openai, [])

    learning_run_process(run_id=run_of(turn).id)

    (request,) = learning_requests(fake_openai)
    prompt = learning_prompt(request)
    assert shown_notes(prompt) == large_pool.visible[:300]
    assert len(large_pool.visible) == 312
    assert shown_topic_counts(prompt) == {"old-topic": 104 + 20, "tea": 206, "pin": 2}
    assert "bob" not in prompt and "dave" not in prompt
    assert "a conclusion from a note that is gone" not in prompt
    assert run_of(turn).status == LearningRun.Status.DONE


def test_a_topic_rename_covers_every_matching_entry_of_the_pool(
    world: World, fake_openai: FakeOpenAI, large_pool: LargePool
) -> None:
    """[W6] Not only the 300 shown: entries past them and entries these readers cannot see."""
    memory_bot_on(world)
    turn = confided_turn(
        ChatFactory.create(owner=world.alice, bot=world.bot), world.alice, "Call it new-topic."
    )
    learning_answer(fake_openai, [{"kind": "rename", "from": "old-topic", "to": "new-topic"}])
    beyond = [entry_id for entry_id in large_pool.visible[300:]]
    assert any(
        EntryTag.objects.filter(entry_id=entry_id, tag="old-topic").exists() for entry_id in beyond
    )

    learning_run_process(run_id=run_of(turn).id)

    run = run_of(turn)
    assert run.status == LearningRun.Status.DONE and run.refusals == []
    assert not EntryTag.objects.filter(tag="old-topic").exists()
    assert (
        set(EntryTag.objects.filter(tag="new-topic").values_list("entry_id", flat=True))
        == large_pool.renamed
    )


def learn(fake: FakeOpenAI, chat: Chat, actor: Actor, text: str, changes: list[object]) -> None:
    """A confided turn whose run proposes `changes`."""
    turn = confided_turn(chat, actor, text)
    learning_answer(fake, changes)
    learning_run_process(run_id=run_of(turn).id)
    run = run_of(turn)
    assert (run.status, run.refusals) == (LearningRun.Status.DONE, [])


def memory_ids(actor: Actor, world: World) -> list[str]:
    response = actor.client().get(f"/v1/bots/{world.bot.id}/memory")
    assert response.status_code == 200, response.json()
    return [entry["id"] for entry in response.json()["entries"]]


def test_invalidation_hides_every_conclusion_drawn_from_it(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[V6, E5] An invalidated fact stays in the history; the observation over it is hidden
    everywhere, learning input included."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I work nights.")
    learning_answer(fake_openai, [fact_change("alice works nights", person_item(turn))])
    learning_run_process(run_id=run_of(turn).id)
    (nights,) = learned(chat)
    learn(
        fake_openai,
        chat,
        world.alice,
        "So tired.",
        [
            observation_change("alice sleeps in the day", nights.id),
        ],
    )
    sleeps = Entry.objects.get(layer=Entry.Layer.OBSERVATION)
    assert sleeps.confidence == 0.8 and f"chat:{chat.id}" in tags_of(sleeps)
    assert set(memory_ids(world.alice, world)) == {nights.id, sleeps.id}

    learn(
        fake_openai,
        chat,
        world.alice,
        "I switched to days.",
        [
            {"kind": "invalidate", "id": nights.id},
        ],
    )

    assert Entry.objects.get(id=nights.id).status == Entry.Status.INVALIDATED
    assert Entry.objects.get(id=sleeps.id).status == Entry.Status.ACTIVE
    assert memory_ids(world.alice, world) == [nights.id]  # the history, without the conclusion
    turn = confided_turn(chat, world.alice, "Anything else?")
    learning_answer(fake_openai, [observation_change("x", sleeps.id)])
    learning_run_process(run_id=run_of(turn).id)
    assert shown_notes(learning_prompt(learning_requests(fake_openai)[-1])) == []
    assert run_of(turn).refusals == [{"change": 0, "reason": "source_not_visible"}]


def test_purging_the_chat_removes_what_was_learned_from_it(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[P3, A4, W7] Deleting the history keeps the memory; purging `chat:<id>` removes the
    facts and the observations drawn from them, even ones learned in another chat."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "My sister is Ana.")
    learning_answer(fake_openai, [fact_change("alice's sister is ana", person_item(turn))])
    learning_run_process(run_id=run_of(turn).id)
    (sister,) = learned(chat)
    # The observation is learned in a later chat, from the fact of the first one.
    later = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(later, world.alice, "Ana visits.")
    learning_answer(
        fake_openai,
        [
            fact_change("ana visits alice", person_item(turn)),
            observation_change("alice is close to her family", sister.id),
        ],
    )
    learning_run_process(run_id=run_of(turn).id)
    close = Entry.objects.get(layer=Entry.Layer.OBSERVATION)
    # [W7] It carries the where-from tags of its sources, so purge reaches it.
    assert f"chat:{chat.id}" in tags_of(close) and f"chat:{later.id}" not in tags_of(close)

    deleted = world.alice.client().delete(f"/v1/chats/{chat.id}/items")
    assert deleted.status_code == 204
    assert sister.id in memory_ids(world.alice, world)

    response = world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge", {"tag": f"chat:{chat.id}"}, format="json"
    )

    assert response.status_code == 200 and response.json() == {"removed": 2}
    assert not Entry.objects.filter(id__in=[sister.id, close.id]).exists()
    assert [entry.content for entry in learned(later)] == ["ana visits alice"]


def test_bot_memory_off_stores_no_run(world: World, fake_openai: FakeOpenAI) -> None:
    """[F4, W8] The bot still gets its answer; nothing is learned."""
    memory_bot_on(world)
    services.organization_settings_update(organization=world.org, bot_memory=False)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)

    turn = confided_turn(chat, world.alice, "I am allergic to nuts.")

    assert Confession.objects.filter(turn=turn).exists()
    assert not LearningRun.objects.exists()
    assert learning_requests(fake_openai) == []


def test_a_test_chat_has_no_confide_and_learns_nothing(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[W8, C1, F1]"""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, test=True)

    confided_turn(chat, world.alice, "I am allergic to nuts.")

    assert not Confession.objects.exists() and not LearningRun.objects.exists()
    assert fake_openai.requests == []


@pytest.mark.parametrize("switch", ["bot_memory_off", "model_unset"])
def test_a_run_stored_before_learning_was_switched_off_learns_nothing(
    world: World, fake_openai: FakeOpenAI, switch: str
) -> None:
    """[W8, B1] The switch is read when the run works, not only when it was stored."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I am allergic to nuts.")
    if switch == "bot_memory_off":
        services.organization_settings_update(organization=world.org, bot_memory=False)
    else:
        services.organization_settings_update(organization=world.org, clear_model=True)
    learning_answer(fake_openai, [fact_change("x", person_item(turn))])

    learning_run_process(run_id=run_of(turn).id)

    run = run_of(turn)
    assert run.status == LearningRun.Status.DONE and run.error == LearningRun.Error.LEARNING_OFF
    assert learning_requests(fake_openai) == [] and learned(chat) == []


def test_a_step_past_its_limit_fails_safely_and_a_later_confide_learns_it(
    world: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    """[B6] The run ends failed with a safe message; the read position stays, so the next
    confided turn's run reads that evidence again."""
    memory_bot_on(world)
    settings.OPENBOT_LEARNING_STEP_SECONDS = 0.5
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first = confided_turn(chat, world.alice, "My cat is called Miso.")
    learning_answer(fake_openai, [fact_change("never used", person_item(first))], delay=3.0)

    learning_run_process(run_id=run_of(first).id)

    run = run_of(first)
    assert run.status == LearningRun.Status.FAILED
    assert run.error == LearningRun.Error.TIMEOUT
    assert Chat.objects.get(id=chat.id).read_position == 0
    assert learned(chat) == []
    (call,) = ModelCall.objects.filter(step_key__startswith=f"learning:{run.id}:")
    assert call.status == ModelCall.Status.TIMEOUT and not call.billed
    learning_run_process(run_id=run.id)  # a failed run stays failed
    assert len(learning_requests(fake_openai)) == 1

    settings.OPENBOT_LEARNING_STEP_SECONDS = 10
    second = confided_turn(chat, world.alice, "She is three.")
    learning_answer(
        fake_openai,
        [
            fact_change("alice's cat is called miso", person_item(first)),
            fact_change("miso is three", person_item(second)),
        ],
    )
    learning_run_process(run_id=run_of(second).id)

    assert run_of(second).status == LearningRun.Status.DONE
    assert "My cat is called Miso." in learning_prompt(learning_requests(fake_openai)[-1])
    assert [entry.content for entry in learned(chat)] == [
        "alice's cat is called miso",
        "miso is three",
    ]
    assert Chat.objects.get(id=chat.id).read_position == second.end_seq


@pytest.mark.django_db(transaction=True)
def test_a_spent_budget_makes_the_run_wait_for_the_next_period(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[B4, W2] The run waits until the next period; recovery does not pick it before, and
    after it a recovery pass (here `manage.py recover_learning`) hands it to a worker."""
    flush_broker()
    memory_bot_on(world)
    # Each answer of the fake costs 5 micro-USD; the confide reply spends the day's budget.
    memory.memory_settings_update(
        pool_id=world.bot.id,
        expected=0,
        changes={"budget_period": "day", "budget_limit_micros": 5},
    )
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, "I run on Sundays.")
    run = run_of(turn)

    before = next_midnight()
    learning_run_process(run_id=run.id)

    run.refresh_from_db()
    assert run.status == LearningRun.Status.WAITING
    assert run.not_before in {before, next_midnight()}  # the start of the next UTC day
    assert learning_requests(fake_openai) == []
    assert run.id not in runs_due()
    assert recover() == 0

    # The next period: the spend lies in the day before, and the wait is over.
    ModelCall.objects.filter(billed=True).update(created_at=timezone.now() - timedelta(days=1))
    LearningRun.objects.filter(id=run.id).update(not_before=timezone.now() - timedelta(seconds=1))
    learning_answer(fake_openai, [fact_change("alice runs on sundays", person_item(turn))])
    assert recover() == 1
    with learning_worker():
        pass  # works off the queue (its own recovery pass on boot may send the run again)

    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(chat)] == ["alice runs on sundays"]
    calls = ModelCall.objects.filter(step_key=f"learning:{run.id}:changes").order_by("attempt")
    assert [(call.attempt, call.status, call.billed) for call in calls] == [
        (1, ModelCall.Status.BUDGET, False),
        (2, ModelCall.Status.OK, True),
    ]


def next_midnight() -> datetime:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(days=1)


def recover() -> int:
    out = io.StringIO()
    call_command("recover_learning", stdout=out)
    enqueued: int = json.loads(out.getvalue())["enqueued"]
    return enqueued


def tea_learned_while(
    world: World, fake_openai: FakeOpenAI, chat: Chat, tea: Entry, meanwhile: Callable[[], object]
) -> Turn:
    """A confided turn in `chat` whose learning step proposes an observation over `tea` and a
    fact of the turn; `meanwhile` runs while the model is answering. The run has ended."""
    turn = confided_turn(chat, world.alice, "Green tea, always.")
    asked = len(fake_openai.requests)
    learning_answer(
        fake_openai,
        [
            observation_change("alice drinks tea daily", tea.id),
            fact_change("alice drinks green tea", person_item(turn)),
        ],
        delay=1.0,
    )

    def work() -> None:
        try:
            learning_run_process(run_id=run_of(turn).id)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    assert fake_openai.wait_for_requests(asked + 1)
    meanwhile()
    worker.join(timeout=30)
    return turn


@pytest.mark.django_db(transaction=True)
def test_apply_checks_the_newest_state_of_every_source(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[W6] A source invalidated while the model thinks is refused at apply; the rest apply."""
    memory_bot_on(world)
    tea = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot), person=world.alice.person
            )
        ],
        content="alice likes tea",
    )
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = tea_learned_while(
        world, fake_openai, chat, tea, lambda: set_status(tea, Entry.Status.INVALIDATED)
    )

    run = run_of(turn)
    assert run.status == LearningRun.Status.DONE
    assert run.refusals == [{"change": 0, "reason": "source_not_visible"}]
    assert "alice likes tea" in learning_prompt(learning_requests(fake_openai)[0])
    assert [entry.content for entry in learned(chat)] == ["alice drinks green tea"]
    assert not Entry.objects.filter(layer=Entry.Layer.OBSERVATION).exists()


@pytest.mark.django_db(transaction=True)
def test_a_step_whose_shown_entry_is_purged_while_the_model_thinks_ends_purged(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """[P4, A12] The answer may carry what the purge removed, so nothing of it applies, and
    the run says why: `purged`, not a model error."""
    memory_bot_on(world)
    tea_chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    tea = fact([ItemFactory.create(chat=tea_chat, person=world.alice.person)], content="tea")
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = tea_learned_while(
        world,
        fake_openai,
        chat,
        tea,
        lambda: memory_purge(pool_id=world.bot.id, tag=f"chat:{tea_chat.id}"),
    )

    run = run_of(turn)
    assert (run.status, run.error) == (LearningRun.Status.FAILED, LearningRun.Error.PURGED)
    assert learned(chat) == [] and not Entry.objects.filter(id=tea.id).exists()
