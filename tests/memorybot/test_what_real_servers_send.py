"""[B8] What real OpenAI-compatible servers (llama.cpp, vLLM, Ollama) and small models send
back, scripted byte for byte on the fake server and taken through real turns and learning
runs: tool calls with extra fields and odd names, answers cut at `max_tokens`, JSON wrapped in
prose or code fences, partial usage, a server that closes the connection mid-answer. Each ends
in a result, the calm path or a recorded refusal — never a 500 or a turn without an end."""

import json
from typing import Any

import pytest

from chats.models import Chat
from conversations.turns import NO_ANSWER
from memory.models import Entry
from memorybot.confide import CALM_REPLY
from memorybot.learning import learning_run_process
from memorybot.models import Confession, Enrichment, LearningRun, ModelCall
from tests.conftest import World
from tests.factories import ChatFactory, EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    learned,
    memory_bot_on,
    person_item,
    run_of,
)
from tests.memorybot.scenes import (
    FAKE_MODEL,
    bot_model_set,
    bot_requests,
    chat_open,
    confide_requests,
    enrichment_answer,
    last_user_text,
    memory_model_set,
    take_turn,
    tool_answers,
)

WORDS = "Which trail should I hike with my dog this weekend?"
NOTE = "Alice's dog Fennel is old and tires after five kilometres."
ENRICHED = f"{WORDS} My dog Fennel is old and tires after five kilometres."
CONFESSION = "I am unsure about the distance."
HEARD = "Thank you for telling me. Tell her openly what you are unsure of."


def completion(
    message: dict[str, Any],
    *,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> str:
    """A chat-completions body as a server writes it (every field spelled out)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-real",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "smollm2",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)


def said(content: str | None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    """The memory bot and the bot on the fake server; alice has a note that could help."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    EntryFactory.create(author=world.alice, bot=world.bot, content=NOTE)
    return world


def turn(world: World, fake_openai: FakeOpenAI, *replies: dict[str, Any]) -> dict[str, Any]:
    """One turn of alice in a new private chat; the fake server answers with `replies`."""
    chat_id = chat_open(world.alice, world.bot)
    for reply in replies:
        fake_openai.reply(**reply)
    return take_turn(world.alice, chat_id, WORDS)


NO_ENRICHMENT = {"content": enrichment_answer(WORDS, [])}


# --- tool calls [F1] ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool_call",
    [
        # llama.cpp (chatml-function-calling): the legacy `function_call` beside, with a name
        # of its own ("confide:"), and an id that spells out the tool.
        pytest.param(
            {
                "id": "call__0_confide_cmpl-1",
                "type": "function",
                "function": {"name": "confide", "arguments": json.dumps({"text": CONFESSION})},
            },
            id="function_call-beside",
        ),
        pytest.param(
            {
                "type": "function",
                "function": {"name": "confide", "arguments": {"text": CONFESSION}},
            },
            id="no-id",
        ),
        pytest.param(
            {
                "id": "call_1",
                "index": 0,
                "type": "function",
                "function": {"name": "confide:", "arguments": json.dumps({"text": CONFESSION})},
            },
            id="name-with-a-colon",
        ),
        pytest.param(
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": " functions.confide ",
                    "arguments": json.dumps({"text": CONFESSION}),
                },
            },
            id="name-with-the-prompt-prefix",
        ),
    ],
)
def test_a_tool_call_as_real_servers_write_it_reaches_confide(
    scene: World, fake_openai: FakeOpenAI, tool_call: dict[str, Any]
) -> None:
    message = said(
        None,
        tool_calls=[tool_call],
        function_call={"name": "confide:", "arguments": json.dumps({"text": CONFESSION})},
    )
    body = turn(
        scene,
        fake_openai,
        NO_ENRICHMENT,
        {"raw": completion(message, finish_reason="tool_calls")},
        {"content": HEARD},
        {"content": "A short trail is best."},
    )
    [heard] = confide_requests(fake_openai)
    assert heard.body["messages"][-1]["content"] == CONFESSION
    assert Confession.objects.get().reply == HEARD
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == [HEARD]
    # The call the bot's model sees again names the tool offered, with an id it answers.
    [asked] = second.body["messages"][-2]["tool_calls"]
    assert asked["function"]["name"] == "confide"
    assert second.body["messages"][-1]["tool_call_id"] == asked["id"] != ""
    assert body["items"][-1]["text"] == "A short trail is best."
    assert LearningRun.objects.filter(turn_id=body["turn"]["id"]).exists()


def test_a_tool_the_model_made_up_is_answered_as_unknown(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """A tidied name must still be one that was offered: nothing else runs."""
    message = said(
        None,
        tool_calls=[{"id": "c1", "function": {"name": "remember:", "arguments": "{}"}}],
    )
    body = turn(
        scene,
        fake_openai,
        NO_ENRICHMENT,
        {"raw": completion(message, finish_reason="tool_calls")},
        {"content": "A short trail is best."},
    )
    assert confide_requests(fake_openai) == []
    _, second = bot_requests(fake_openai)
    assert tool_answers(second) == ["There is no tool named 'remember:'."]
    assert body["items"][-1]["text"] == "A short trail is best."


# --- answers cut at max_tokens -------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reply", "status"),
    [
        # The words the model did write answer.
        pytest.param("Take the short lake loop.", "Take the short lake loop.", "ok", id="text"),
        pytest.param(None, NO_ANSWER, "error", id="nothing-else"),
    ],
)
def test_a_tool_call_cut_at_max_tokens_calls_nothing(
    scene: World, fake_openai: FakeOpenAI, content: str | None, reply: str, status: str
) -> None:
    """Arguments cut off mid-way are no call; an answer with nothing else is unusable, and
    the turn still ends."""
    message = said(
        content,
        tool_calls=[{"id": "c1", "function": {"name": "confide", "arguments": '{"text": "I am'}}],
    )
    body = turn(
        scene, fake_openai, NO_ENRICHMENT, {"raw": completion(message, finish_reason="length")}
    )
    assert confide_requests(fake_openai) == []
    assert body["items"][-1]["text"] == reply
    assert body["turn"]["endedAt"] is not None
    call = ModelCall.objects.get(purpose="answer")
    assert (call.status, call.error_kind) == (status, "" if status == "ok" else "bad_output")


def test_a_confide_reply_cut_at_max_tokens_gives_the_calm_reply(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """A reply the server cut off may stop mid-word: it is unusable [F2]. The request asks
    for a bounded reply, so a model that rambles is cut by the server, not by the deadline."""
    turn(
        scene,
        fake_openai,
        NO_ENRICHMENT,
        {"content": None, "tool_calls": [("confide", {"text": CONFESSION})]},
        {
            "raw": completion(
                said("Thank you for telling me. A mistake is part of the wo"),
                finish_reason="length",
            )
        },
        {"content": "A short trail is best."},
    )
    [heard] = confide_requests(fake_openai)
    assert isinstance(heard.body.get("max_tokens"), int)
    assert Confession.objects.get().reply == CALM_REPLY


def test_an_enrichment_request_asks_for_a_bounded_answer(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    turn(scene, fake_openai, NO_ENRICHMENT, {"content": "A short trail is best."})
    request = fake_openai.requests[0]
    assert request.answer_form == "json_schema"  # [K2]
    assert isinstance(request.body.get("max_tokens"), int)


# --- JSON in prose and code fences [N1, W7] -------------------------------------------------


@pytest.mark.parametrize(
    ("wrapping", "used"),
    [
        # `{}` stands for the whole answer object the duty asked for.
        pytest.param("```json\n{}\n```", True, id="code-fence"),
        pytest.param("Here is the JSON you asked for:\n{}\nI hope it helps.", True, id="prose"),
        pytest.param('{} {"more": ', True, id="trailing-cut-text"),
        pytest.param("{}\n\n\n\n\n\n", True, id="blank-lines-until-max-tokens"),
        pytest.param("Notes {like this} aside: {}", True, id="a-brace-in-prose-first"),
        # Unusable: the input stays [N4].
        pytest.param('{"text": "' + ENRICHED + '", "entries": ["mem_', False, id="cut-mid-object"),
        pytest.param('{"message": "' + ENRICHED + '"}', False, id="another-shape"),
        pytest.param("I would add that Fennel is old.", False, id="prose-only"),
    ],
)
def test_an_enrichment_wrapped_in_prose_or_fences_is_used(
    scene: World, fake_openai: FakeOpenAI, wrapping: str, used: bool
) -> None:
    note = Entry.objects.get()  # alice's note
    answer = wrapping.replace("{}", enrichment_answer(ENRICHED, [note.id]), 1)
    turn(
        scene,
        fake_openai,
        {"raw": completion(said(answer), finish_reason="length")},
        {"content": "Take the short lake loop."},
    )
    [answer_request] = bot_requests(fake_openai)
    assert last_user_text(answer_request) == (ENRICHED if used else WORDS)
    assert list(Enrichment.objects.values_list("entry_ids", flat=True)) == (
        [[note.id]] if used else []
    )


def test_learning_wrapped_in_prose_and_a_fence_applies(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    confided = confided_turn(chat, world.alice, "I am vegetarian.")
    changes = {"changes": [fact_change("alice is vegetarian", person_item(confided))]}
    fake_openai.reply(
        raw=completion(
            said(f"Sure! Here are the changes:\n```json\n{json.dumps(changes)}\n```\nDone."),
            finish_reason="length",
        )
    )

    learning_run_process(run_id=run_of(confided).id)

    run = run_of(confided)
    assert (run.status, run.refusals) == (LearningRun.Status.DONE, [])
    assert [entry.content for entry in learned(chat)] == ["alice is vegetarian"]
    # A bounded answer, like the memory bot's other duties.
    assert isinstance(fake_openai.requests[-1].body.get("max_tokens"), int)


def test_learning_cut_mid_object_fails_the_run_and_keeps_the_read_position(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The changes inside a cut answer are not applied one by one: only a whole answer is."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    confided = confided_turn(chat, world.alice, "I am vegetarian.")
    change = json.dumps(fact_change("alice is vegetarian", person_item(confided)))
    fake_openai.reply(
        raw=completion(said('{"changes": [' + change + ', {"kind": "ad'), finish_reason="length")
    )

    learning_run_process(run_id=run_of(confided).id)

    run = run_of(confided)
    assert run.status == LearningRun.Status.FAILED
    assert Chat.objects.get(id=chat.id).read_position == 0
    assert learned(chat) == []


# --- usage [B3] -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "tokens", "cost"),
    [
        # The count left out is what the server confirmed: total minus the other.
        pytest.param(
            {"prompt_tokens": 1000, "total_tokens": 1500}, (1000, 500), 450, id="no-completion"
        ),
        pytest.param(
            {"completion_tokens": 500, "total_tokens": 1500}, (1000, 500), 450, id="no-prompt"
        ),
        # Nothing that confirms a cost: unknown, and not billed.
        pytest.param({"prompt_tokens": 1000}, (1000, None), None, id="one-count-only"),
        pytest.param(
            {"prompt_tokens": 1000, "total_tokens": 10}, (1000, None), None, id="total-too-small"
        ),
        pytest.param({"prompt_tokens": None, "completion_tokens": None}, None, None, id="nulls"),
        pytest.param({"prompt_tokens": "1000", "completion_tokens": "5"}, None, None, id="strings"),
        pytest.param({"prompt_tokens": -1, "completion_tokens": 500}, (None, 500), None, id="neg"),
    ],
)
def test_partial_usage_is_billed_only_as_far_as_it_confirms(
    scene: World,
    fake_openai: FakeOpenAI,
    usage: dict[str, Any],
    tokens: tuple[int | None, int | None] | None,
    cost: int | None,
) -> None:
    turn(
        scene,
        fake_openai,
        {"raw": completion(said(enrichment_answer(WORDS, [])), usage=usage)},
        {"content": "A short trail is best."},
    )
    call = ModelCall.objects.get(purpose="enrichment")
    assert call.status == "ok"
    assert (call.input_tokens, call.output_tokens) == (tokens or (None, None))
    assert (call.cost_micros, call.billed) == (cost, cost is not None)


def test_an_unusable_answer_is_still_billed_for_what_the_server_confirmed(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """The server spent the tokens whatever we make of its answer [B3]."""
    message = said(
        None, tool_calls=[{"id": "c1", "function": {"name": "confide", "arguments": "7"}}]
    )
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    body = turn(
        scene,
        fake_openai,
        NO_ENRICHMENT,
        {"raw": completion(message, finish_reason="tool_calls", usage=usage)},
    )
    assert body["items"][-1]["text"] == NO_ANSWER
    call = ModelCall.objects.get(purpose="answer")
    assert (call.status, call.error_kind) == ("error", "bad_output")
    assert (call.input_tokens, call.output_tokens) == (1000, 500)
    assert call.cost_micros == 450 and call.billed is True


# --- a server that closes the connection [C6] -----------------------------------------------


def test_a_server_that_closes_mid_answer_is_the_calm_path(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    body = turn(
        scene,
        fake_openai,
        {"content": enrichment_answer(ENRICHED, []), "cut_after": 40},
        {"content": None, "tool_calls": [("confide", {"text": CONFESSION})]},
        {"content": HEARD, "cut_after": 40},
        {"content": "A short trail is best.", "cut_after": 40},
    )
    first, _ = bot_requests(fake_openai)
    assert last_user_text(first) == WORDS
    assert Confession.objects.get().reply == CALM_REPLY
    assert body["items"][-1]["text"] == NO_ANSWER
    assert body["turn"]["endedAt"] is not None
    assert [
        (call.purpose, call.status, call.error_kind)
        for call in ModelCall.objects.order_by("id")
        if call.status != "ok"
    ] == [
        ("enrichment", "error", "connection"),
        ("confide", "error", "connection"),
        ("answer", "error", "connection"),
    ]
