"""[B3–B7, F2, N3, N4] A turn end to end, over HTTP, with the bot's model and the memory bot
on the fake OpenAI-compatible server: what the memory bot costs, what a spent budget, a busy
slot, a failing or slow model do to the turn — the calm reply, the unchanged input, never a
500 — and what the bot's model sees in the history.
"""

import threading
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from pytest_django.fixtures import Settings

from conversations.turns import NO_ANSWER
from memorybot.confide import CALM_REPLY
from memorybot.gateway import CallOutcome, model_call
from memorybot.models import Confession, Enrichment, ModelCall
from memorybot.providers import Message, ModelRequest
from openbot.models import Organization
from tests.conftest import World
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    OFFLINE_MODEL,
    bot_model_set,
    bot_requests,
    chat_open,
    confide_call,
    confide_requests,
    enrich_requests,
    enrichment_answer,
    last_user_text,
    memory_bot_requests,
    memory_model_set,
    pool_settings,
    take_turn,
    tool_answers,
)

WORDS = "Which trail should I hike with my dog this weekend?"
NOTE = "Alice's dog Fennel is old and tires after five kilometres."


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    """Org A's memory bot and the bot itself both on the fake server; alice has an entry
    that could help, so every turn of hers would be enriched if the memory bot could."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    EntryFactory.create(author=world.alice, bot=world.bot, content=NOTE)
    return world


def calls_of(purpose: str) -> list[ModelCall]:
    return list(ModelCall.objects.filter(purpose=purpose).order_by("id"))


def prior_call(world: World) -> CallOutcome:
    """An earlier memory-bot call of the bot, answered by the reply queued on the fake
    server (1000/500 tokens cost 450 micro-USD at the test price)."""
    return model_call(
        organization=world.org,
        bot=world.bot,
        purpose="confide",
        model=FAKE_MODEL,
        request=ModelRequest(messages=(Message.user("an earlier confession"),)),
        deadline_s=5.0,
    )


def assert_memory_bot_stood_aside(fake_openai: FakeOpenAI) -> None:
    """The turn went on with the person's own words and the calm reply [B4, B6, F2, N4]."""
    first, second = bot_requests(fake_openai)
    assert last_user_text(first) == WORDS
    assert tool_answers(second) == [CALM_REPLY]
    assert Enrichment.objects.count() == 0
    assert list(Confession.objects.values_list("reply", flat=True)) == [CALM_REPLY]


# --- cost [B3] ------------------------------------------------------------------------------


def test_confirmed_usage_of_a_turn_is_billed(scene: World, fake_openai: FakeOpenAI) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []), usage=(1000, 500))
    fake_openai.reply(**confide_call("I am unsure about the distance."), usage=(10, 5))
    fake_openai.reply(content="You are doing fine.", usage=(1000, 500))
    fake_openai.reply(content="A short trail is best.", usage=(10, 5))
    take_turn(scene.alice, chat_id, WORDS)
    [enrichment] = calls_of("enrichment")
    [confide] = calls_of("confide")
    for call in (enrichment, confide):
        assert call.status == "ok"
        assert (call.input_tokens, call.output_tokens) == (1000, 500)
        assert call.cost_micros == 450 and call.billed is True
        assert call.organization_id == scene.org.id and call.bot_id == scene.bot.id


def test_missing_usage_of_a_turn_is_unknown_and_not_billed(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []), usage=None)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="You are doing fine.", usage=None)
    fake_openai.reply(content="A short trail is best.")
    take_turn(scene.alice, chat_id, WORDS)
    [confide] = calls_of("confide")
    assert Confession.objects.get().reply == "You are doing fine."
    for call in (*calls_of("enrichment"), confide):
        assert call.status == "ok"
        assert call.cost_micros is None and call.billed is False
        assert call.input_tokens is None and call.output_tokens is None


# --- budget [B4] ----------------------------------------------------------------------------


def test_a_spent_budget_gives_the_calm_reply_and_the_unchanged_input(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    pool_settings(scene.bot, budget_period="day", budget_limit_micros=400)
    fake_openai.reply(content="heard", usage=(1000, 500))
    assert prior_call(scene).ok  # 450 of 400 micro-USD spent
    fake_openai.requests.clear()
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="A short trail is best.")
    body = take_turn(scene.alice, chat_id, WORDS)
    assert memory_bot_requests(fake_openai) == []
    assert len(fake_openai.requests) == 2
    assert_memory_bot_stood_aside(fake_openai)
    assert [item["text"] for item in body["items"]] == [WORDS, "A short trail is best."]
    assert [call.status for call in calls_of("enrichment")] == ["budget"]
    assert [call.status for call in calls_of("confide")] == ["ok", "budget"]


def test_unbilled_calls_do_not_spend_the_budget(scene: World, fake_openai: FakeOpenAI) -> None:
    pool_settings(scene.bot, budget_period="month", budget_limit_micros=1)
    bot_model_set(scene.bot, OFFLINE_MODEL)  # the bot's answers cost nothing
    fake_openai.reply(content="heard", usage=None)
    assert prior_call(scene).ok  # unknown cost: not billed [B3]
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []), usage=None)
    fake_openai.reply(content="I hear you; tell the person openly.", usage=None)
    take_turn(scene.alice, chat_id, WORDS)
    assert len(enrich_requests(fake_openai)) == 1
    assert Confession.objects.get().reply == "I hear you; tell the person openly."


def test_the_bots_own_answers_do_not_spend_the_memory_bots_budget(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    pool_settings(scene.bot, budget_period="day", budget_limit_micros=400)
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []), usage=None)
    fake_openai.reply(content="A short trail is best.", usage=(1000, 500))  # 450 micro-USD
    take_turn(scene.alice, chat_id, WORDS)
    fake_openai.reply(content=enrichment_answer("And tomorrow?", []), usage=None)
    take_turn(scene.alice, chat_id, "And tomorrow?")
    assert len(enrich_requests(fake_openai)) == 2


# --- concurrency [B5, B6] -------------------------------------------------------------------


@dataclass
class BusyTask:
    thread: threading.Thread
    outcomes: list[CallOutcome]

    def finish(self) -> list[str]:
        """Wait for the task; the statuses of its call."""
        self.thread.join(timeout=30)
        return [outcome.status for outcome in self.outcomes]


def occupy_the_slot(world: World, fake_openai: FakeOpenAI, delay: float) -> BusyTask:
    """Another memory-bot task of the bot (a learning step) holds the only slot while its
    model takes `delay` seconds; returns once its request reached the model."""
    fake_openai.reply(content="learned", delay=delay)
    outcomes: list[CallOutcome] = []

    def learning_step() -> None:
        try:
            outcomes.append(
                model_call(
                    organization=world.org,
                    bot=world.bot,
                    purpose="learning",
                    model=FAKE_MODEL,
                    request=ModelRequest(messages=(Message.user("learn this"),)),
                    deadline_s=30.0,
                    concurrency=1,
                )
            )
        finally:
            connection.close()

    thread = threading.Thread(target=learning_step)
    thread.start()
    assert fake_openai.wait_for_requests(1)
    return BusyTask(thread=thread, outcomes=outcomes)


@pytest.mark.django_db(transaction=True)
def test_a_task_past_its_deadline_waiting_for_a_slot_gets_the_calm_reply(
    scene: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_REPLY_DEADLINE_SECONDS = 0.5
    pool_settings(scene.bot, concurrency=1)
    # The offline bot confides once and then quotes the input it was given.
    bot_model_set(scene.bot, OFFLINE_MODEL)
    chat_id = chat_open(scene.alice, scene.bot)
    busy = occupy_the_slot(scene, fake_openai, delay=4.0)
    try:
        body = take_turn(scene.alice, chat_id, WORDS)
    finally:
        statuses = busy.finish()
    assert len(fake_openai.requests) == 1  # only the task that held the slot
    assert body["items"][1]["text"] == f"I read your message: “{WORDS}”"  # unchanged input
    assert Enrichment.objects.count() == 0
    assert list(Confession.objects.values_list("reply", flat=True)) == [CALM_REPLY]
    assert [call.status for call in calls_of("enrichment")] == ["no_slot"]
    assert [call.status for call in calls_of("confide")] == ["no_slot"]
    # The task that held the slot was not disturbed.
    assert statuses == ["ok"]


@pytest.mark.django_db(transaction=True)
def test_a_waiting_task_goes_on_when_the_slot_frees_in_time(
    scene: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_REPLY_DEADLINE_SECONDS = 10
    pool_settings(scene.bot, concurrency=1)
    bot_model_set(scene.bot, OFFLINE_MODEL)  # only the memory bot's tasks reach the server
    chat_id = chat_open(scene.alice, scene.bot)
    busy = occupy_the_slot(scene, fake_openai, delay=0.5)
    try:
        fake_openai.reply(content=enrichment_answer(WORDS, []))
        fake_openai.reply(content="I hear you.")
        take_turn(scene.alice, chat_id, WORDS)
    finally:
        assert busy.finish() == ["ok"]
    assert len(fake_openai.requests) == 3
    assert len(enrich_requests(fake_openai)) == len(confide_requests(fake_openai)) == 1
    assert fake_openai.peak_in_flight == 1  # never two memory-bot tasks at once
    assert Confession.objects.get().reply == "I hear you."


# --- model failures [B6, F2, N4] ------------------------------------------------------------

FAILURES = [
    pytest.param({"status": 500}, id="http-500"),
    pytest.param({"status": 429}, id="http-429"),
    pytest.param({"raw": "<html>this is not json"}, id="garbage"),
    pytest.param({"raw": '{"choices": []}'}, id="no-choices"),
    pytest.param({"delay": 3.0}, id="past-the-deadline"),
    pytest.param({"hang_up": True}, id="hang-up"),
]


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failing_memory_bot_gives_the_calm_reply_and_the_unchanged_input(
    scene: World, fake_openai: FakeOpenAI, settings: Settings, failure: dict[str, Any]
) -> None:
    settings.OPENBOT_REPLY_DEADLINE_SECONDS = 1
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**failure)  # the enrichment
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(**failure)  # the confession
    fake_openai.reply(content="A short trail is best.")
    body = take_turn(scene.alice, chat_id, WORDS)
    assert len(memory_bot_requests(fake_openai)) == 2
    assert_memory_bot_stood_aside(fake_openai)
    assert body["items"][-1]["text"] == "A short trail is best."
    expected = "timeout" if "delay" in failure else "error"
    assert [call.status for call in calls_of("enrichment") + calls_of("confide")] == [
        expected,
        expected,
    ]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("this is not json", id="not-json"),
        pytest.param('["a list"]', id="not-an-object"),
        pytest.param('{"text": "", "entries": []}', id="empty-text"),
        pytest.param('{"text": "Fennel is old.", "entries": "mem_x"}', id="entries-not-a-list"),
        pytest.param('{"text": "Fennel is old.", "entries": [7]}', id="entries-not-ids"),
        pytest.param('{"entries": []}', id="no-text"),
    ],
)
def test_unusable_output_keeps_the_input_and_gives_the_calm_reply(
    scene: World, fake_openai: FakeOpenAI, answer: str
) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=answer)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="   ")  # a reply with nothing in it is unusable too
    fake_openai.reply(content="A short trail is best.")
    take_turn(scene.alice, chat_id, WORDS)
    assert_memory_bot_stood_aside(fake_openai)


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        pytest.param({"status": 500}, "model_error", id="http-500"),
        pytest.param({"raw": "garbage"}, "model_error", id="garbage"),
        pytest.param({"hang_up": True}, "model_error", id="hang-up"),
        pytest.param({"content": "  "}, "model_error", id="empty-answer"),
        pytest.param({"delay": 3.0}, "timeout", id="past-the-deadline"),
        pytest.param({"trickle": 0.1}, "timeout", id="trickle"),
    ],
)
def test_a_failing_bot_model_still_ends_the_turn(
    scene: World, fake_openai: FakeOpenAI, settings: Settings, failure: dict[str, Any], error: str
) -> None:
    settings.OPENBOT_REPLY_DEADLINE_SECONDS = 1
    settings.OPENBOT_ANSWER_DEADLINE_SECONDS = 1  # the bot's own model has a deadline of its own
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []))
    fake_openai.reply(**failure)
    body = take_turn(scene.alice, chat_id, WORDS)
    assert [item["kind"] for item in body["items"]] == ["person", "bot"]
    assert body["items"][1]["text"] == NO_ANSWER
    assert body["turn"]["endedAt"] is not None
    assert body["turn"]["error"] == error  # [C6] what went wrong, as a code


def test_an_unknown_memory_model_gives_the_calm_reply(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    # [A15] The services refuse such a name now; one stored before that still gives the calm path.
    Organization.objects.filter(pk=scene.org.pk).update(bot_memory_model="nonsense:model")
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="A short trail is best.")
    take_turn(scene.alice, chat_id, WORDS)
    assert memory_bot_requests(fake_openai) == []
    assert_memory_bot_stood_aside(fake_openai)


def test_the_calm_reply_is_the_same_every_time(scene: World, fake_openai: FakeOpenAI) -> None:
    memory_model_set(scene.org, None)
    chat_id = chat_open(scene.alice, scene.bot)
    for text in ("I got the date wrong.", "I am proud of this answer."):
        fake_openai.reply(**confide_call(text))
        fake_openai.reply(content="Done.")
        take_turn(scene.alice, chat_id, WORDS)
    assert list(Confession.objects.values_list("reply", flat=True)) == [CALM_REPLY, CALM_REPLY]
    assert memory_bot_requests(fake_openai) == []


# --- what the bot's model sees [N3] ---------------------------------------------------------


def test_the_history_keeps_the_persons_words(scene: World, fake_openai: FakeOpenAI) -> None:
    entry_id = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Fennel likes shady forest paths."
    ).id
    enriched = f"{WORDS} (Fennel likes shady forest paths.)"
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(enriched, [entry_id]))
    fake_openai.reply(content="Take the forest loop.")
    take_turn(scene.alice, chat_id, WORDS)
    fake_openai.reply(content=enrichment_answer("And how long?", []))
    fake_openai.reply(content="About an hour.")
    take_turn(scene.alice, chat_id, "And how long?")

    first, second = bot_requests(fake_openai)
    assert last_user_text(first) == enriched  # the bot's model sees the new input
    history = [(message["role"], message["content"]) for message in second.body["messages"][1:]]
    assert history == [
        ("user", WORDS),
        ("assistant", "Take the forest loop."),
        ("user", "And how long?"),
    ]
    items = scene.alice.client().get(f"/v1/chats/{chat_id}/items").json()["items"]
    assert [item["text"] for item in items] == [
        WORDS,
        "Take the forest loop.",
        "And how long?",
        "About an hour.",
    ]
