"""[B8] The memory bot with a real model server in the loop: llama.cpp's OpenAI-compatible
server and SmolLM2-135M-Instruct (see conftest), everything over HTTP.

A model this small says odd things — prose for JSON, JSON of another shape, replies cut at
the token limit, tool calls or none. So the suite asserts only what must hold whatever it
says: every turn ends; every call is recorded with the usage the server reported and billed
at the configured price; unusable output becomes the calm reply, the unchanged input or a
recorded refusal; nothing the model names that its readers may not see is ever used, and
nothing they may not see is ever sent to it; every learning run ends; no 5xx.
"""

import json
import math
import statistics
from collections import defaultdict
from typing import Any

import pytest

from chats.models import Chat, Item, Turn
from conversations.turns import BOT_PROMPT, NO_ANSWER
from memory.models import Entry, EntryTag
from memorybot.confide import CALM_REPLY, PRIEST_PROMPT
from memorybot.local_model import MODEL as LOCAL_MODEL
from memorybot.models import Confession, Enrichment, LearningRun, ModelCall
from memorybot.providers import first_json_object
from openbot import services
from openbot.models import Bot
from tests.conftest import Actor, World
from tests.memorybot.learning_world import flush_broker, learning_worker
from tests.realmodel.conftest import PRICE_IN, PRICE_OUT
from tests.realmodel.recorder import Exchange, Recorder

pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]

ALICE_NOTE = "I am vegetarian and I cook for two people."
BOBS_NOTE = "Bob's door code is 4711-SECRET."
# How a call to the local server may end: answered (usable, unusable, or after its deadline),
# or cut off at its deadline while the server was still working.
ANSWERED = {("ok", ""), ("error", "bad_output"), ("timeout", "late")}
CUT_OFF = {("timeout", "timeout")}
# The safe texts a run may end with (never model output) [A12].
# [A12] A run's error is a cause code, never model output.
RUN_ERRORS = {"", *LearningRun.Error.values}


class Client:
    """HTTP as one actor; every answer is kept, so the test can say none was a 5xx."""

    def __init__(self, actor: Actor, statuses: list[int]) -> None:
        self.actor, self.statuses = actor, statuses

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        client = self.actor.client()
        response = getattr(client, method)(path, body, format="json") if body else client.get(path)
        self.statuses.append(response.status_code)
        assert response.status_code < 500, response.content
        return response.json()

    def turn(self, chat_id: str, text: str) -> dict[str, Any]:
        body: dict[str, Any] = self.call("post", f"/v1/chats/{chat_id}/turns", {"text": text})
        assert "turn" in body, body
        return body

    def memory_ids(self, bot: Bot) -> set[str]:
        return {entry["id"] for entry in self.call("get", f"/v1/bots/{bot.id}/memory")["entries"]}


def wire_key(messages: list[dict[str, Any]]) -> tuple[tuple[str, Any], ...]:
    return tuple((message["role"], message.get("content")) for message in messages)


def exchanges_by_call(recorder: Recorder) -> dict[int, Exchange]:
    """Each recorded call's exchange with the server, matched on the messages it sent. Every
    exchange belongs to a recorded call: nothing reached the server unrecorded. A call may
    first have been refused its answer form [K2]: the same messages, asked again in the next
    form; its exchange is the last one."""
    waiting: dict[tuple[tuple[str, Any], ...], list[Exchange]] = defaultdict(list)
    for exchange in recorder.exchanges:
        waiting[wire_key(exchange.request["messages"])].append(exchange)
    matched = {}
    for call in ModelCall.objects.filter(model=LOCAL_MODEL).order_by("id"):
        sent = waiting[wire_key(json.loads(call.request)["messages"])]
        while len(sent) > 1 and sent[0].status != 200 and "response_format" in sent[0].request:
            sent.pop(0)
        if sent:
            matched[call.id] = sent.pop(0)
    assert not any(waiting.values()), "a request reached the server without a recorded call"
    return matched


def test_the_memory_bot_copes_with_a_real_model(world: World, local_model_calls: Recorder) -> None:
    flush_broker()
    statuses: list[int] = []
    alice, bob, carol = (Client(world.actor(name), statuses) for name in ("alice", "bob", "carol"))
    alice.call(
        "patch", f"/v1/organizations/{world.org.id}/settings", {"botMemoryModel": LOCAL_MODEL}
    )
    # A bot whose own model is the local one; the world's bot keeps the offline model, which
    # confides on every turn, so the local memory bot surely hears confessions and learns.
    talker = services.bot_create(organization=world.org, name="talker", model=LOCAL_MODEL)
    services.grant_set(bot=talker, level="read", organization=world.org)
    remember = {"_tag": "Remember", "content": ALICE_NOTE}
    alice.call("post", f"/v1/bots/{talker.id}/memory", {"command": remember})
    alice.call("post", f"/v1/bots/{world.bot.id}/memory", {"command": remember})
    bobs = {"_tag": "Remember", "content": BOBS_NOTE}
    bob.call("post", f"/v1/bots/{talker.id}/memory", {"command": bobs})
    bob.call("post", f"/v1/bots/{world.bot.id}/memory", {"command": bobs})

    private = alice.call("post", "/v1/chats", {"bot": talker.id})["id"]
    confiding = alice.call("post", "/v1/chats", {"bot": world.bot.id})["id"]
    group = carol.call("post", "/v1/chats", {"bot": talker.id, "channel": world.channel.id})["id"]

    turns = [
        alice.turn(private, "I put meat in the recipe by mistake. What should I cook tonight?"),
        alice.turn(confiding, "Please plan a dinner for tonight; I told you what I eat."),
        alice.turn(confiding, "Also remember that I am allergic to peanuts."),
    ]
    with learning_worker(threads=1, timeout_s=900):
        pass
    turns += [
        alice.turn(private, "And what should I cook tomorrow?"),
        carol.turn(group, "What should we cook for the team lunch on Friday?"),
    ]
    with learning_worker(threads=1, timeout_s=900):
        pass

    # No 5xx, and every turn ended with the bot's item [C6].
    assert statuses and max(statuses) < 500
    assert not Turn.objects.filter(ended_at__isnull=True).exists()
    for body in turns:
        assert body["turn"]["endedAt"] is not None
        assert body["items"][-1]["kind"] == "bot" and body["items"][-1]["text"].strip()

    # Every call is recorded, and what the server reported is what was recorded and billed
    # [B3]. A call whose answer came after its deadline [B6] confirmed nothing when it was cut
    # off (nothing billed), or was read late and billed like any other.
    # (The world's bot answers with the offline model: those calls reach no server.)
    calls = list(ModelCall.objects.exclude(model="offline:extractive").order_by("id"))
    matched = exchanges_by_call(local_model_calls)
    assert {call.model for call in calls} == {LOCAL_MODEL}
    assert {call.purpose for call in calls} >= {"answer", "confide", "enrichment", "learning"}
    for call in calls:
        assert (call.status, call.error_kind) in ANSWERED | CUT_OFF, (call.purpose, call.status)
        if (call.status, call.error_kind) in CUT_OFF:
            assert (call.input_tokens, call.cost_micros, call.billed) == (None, None, False)
            continue
        exchange = matched[call.id]
        assert exchange.status == 200, exchange.answer
        tokens_in, tokens_out = exchange.usage
        assert tokens_in is not None and tokens_out is not None
        assert (call.input_tokens, call.output_tokens) == (tokens_in, tokens_out)
        assert call.cost_micros == math.ceil((tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1000)
        assert call.billed is True

    # Confide: the model's own reply when it finished one, else the calm reply [F2].
    finished_replies = {
        (exchange.choice.get("message") or {}).get("content", "").strip()
        for exchange in local_model_calls.exchanges
        if exchange.request["messages"][0]["content"] == PRIEST_PROMPT
        and exchange.choice.get("finish_reason") != "length"
    }
    confessions = list(Confession.objects.all())
    assert confessions, "the offline bot confides on every turn"
    for confession in confessions:
        assert confession.reply == CALM_REPLY or confession.reply in finished_replies

    # Enrichment: the bot's model saw the person's own words or a stored rewrite made only
    # from entries its readers may see [N2, N4].
    for turn in Turn.objects.filter(person__isnull=False):
        said = Item.objects.get(chat_id=turn.chat_id, seq=turn.input_seq).text
        rewrite = Enrichment.objects.filter(turn=turn).first()
        asked = [
            json.loads(call.request)["messages"]
            for call in ModelCall.objects.filter(purpose="answer", chat_id=turn.chat_id)
        ]
        seen = {
            messages[-1]["content"]
            for messages in asked
            if messages[0]["content"] == BOT_PROMPT and messages[-1]["role"] == "user"
        }
        assert (rewrite.text if rewrite else said) in seen
        if rewrite is not None:
            assert rewrite.original == said
            reader = alice if turn.chat_id != group else carol
            assert set(rewrite.entry_ids) <= reader.memory_ids(
                Chat.objects.get(id=turn.chat_id).bot
            )
    assert not Enrichment.objects.filter(chat_id=group).exists()  # the group sees no entry

    # Nothing a reader may not see reached the model: bob's note never, alice's private
    # notes never for the group chat [W5, N2].
    assert all(BOBS_NOTE not in json.dumps(ex.request) for ex in local_model_calls.exchanges)
    assert all(ALICE_NOTE not in call.request for call in calls if call.chat_id == group)

    # Learning: every run ended, with a safe error at most, and refusals recorded [W7, A12].
    runs = list(LearningRun.objects.all())
    assert len(runs) >= 2
    for run in runs:
        assert run.status in (LearningRun.Status.DONE, LearningRun.Status.FAILED)
        assert run.error in RUN_ERRORS
        for refusal in run.refusals:
            assert set(refusal) == {"change", "reason"} and isinstance(refusal["reason"], str)
    # What was learned is alice's: for her, from her chats, never for bob or carol [V2, V4].
    learned = set(
        EntryTag.objects.filter(tag__in=[f"chat:{private}", f"chat:{confiding}"]).values_list(
            "entry_id", flat=True
        )
    )
    active = set(Entry.objects.filter(id__in=learned, status="active").values_list("id", flat=True))
    assert active <= alice.memory_ids(talker) | alice.memory_ids(world.bot)
    for other in (bob, carol):
        assert not learned & (other.memory_ids(talker) | other.memory_ids(world.bot))

    report_figures(calls, matched, runs)


def report_figures(
    calls: list[ModelCall], matched: dict[int, Exchange], runs: list[LearningRun]
) -> None:
    """Printed for `pytest -s`: per-call p50 of the server per duty, and how many learning
    steps applied at least one change."""
    seconds: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        if call.id in matched:
            seconds[call.purpose].append(matched[call.id].seconds)
    for purpose, values in sorted(seconds.items()):
        print(f"realmodel {purpose}: {len(values)} calls, p50 {statistics.median(values):.2f} s")
    # A step's output applied a change when its run ended `done` with fewer refusals than
    # changes proposed; steps are the runs' answered learning calls.
    steps = applied = 0
    for run in runs:
        step = ModelCall.objects.filter(step_key=f"learning:{run.id}:changes", status="ok").first()
        if step is None:
            continue
        answer = first_json_object(json.loads(step.result)["content"])
        changes = answer.get("changes") if answer else None
        proposed = len(changes) if isinstance(changes, list) else 0
        steps += 1
        applied += run.status == LearningRun.Status.DONE and proposed > len(run.refusals)
    print(f"realmodel learning steps that applied a change: {applied}/{steps}")
    print(f"realmodel runs: {sorted((run.status, run.error) for run in runs)}")
    unanswered = Item.objects.filter(kind=Item.Kind.BOT, turn__isnull=False)
    print(f"realmodel turns without an answer: {sum(i.text == NO_ANSWER for i in unanswered)}")
