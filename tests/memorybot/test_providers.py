"""[B2] Model strings, the shared request/result shapes, and the offline baseline."""

import json

import pytest

from memorybot.gateway import model_call
from memorybot.models import ModelCall
from memorybot.providers import (
    AnswerSchema,
    EntryText,
    ItemText,
    Material,
    Message,
    ModelRequest,
    ModelResult,
    OfflineProvider,
    Tool,
    ToolCall,
    Usage,
    strict_object,
)
from memorybot.quoting import QUOTED_RULE
from openbot.model_names import ModelName, ModelNameError, parse_model
from tests.conftest import World
from tests.fakes.openai_server import FakeOpenAI

CONFIDE_TOOL = Tool(
    name="confide",
    description="Say how the work is going: stuck, unsure, sad, proud, or a mistake.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}, "mood": {"type": "integer"}},
        "required": ["text"],
    },
)

ANSWER = AnswerSchema(name="note", schema=strict_object({"text": {"type": "string"}}))


def offline(purpose: str, request: ModelRequest) -> ModelResult:
    return OfflineProvider("extractive").complete(purpose=purpose, request=request, timeout_s=1)


def test_model_strings() -> None:
    assert parse_model("openai:gpt-4o-mini") == ModelName("openai", "gpt-4o-mini")
    assert parse_model("openai:llama3:8b") == ModelName("openai", "llama3:8b")
    assert str(parse_model("offline:extractive")) == "offline:extractive"
    for bad, says in [
        ("gpt-4o-mini", "<provider>:<model>"),
        ("anthropic:claude", "unknown model provider"),
        ("openai:", "empty"),
        ("openai:  ", "empty"),
    ]:
        with pytest.raises(ModelNameError, match=says):
            parse_model(bad)


def test_requests_and_results_survive_their_json_form() -> None:
    request = ModelRequest(
        messages=(
            Message.system("s"),
            Message.user("u"),
            Message.assistant(None, [ToolCall(id="c1", name="confide", arguments={"text": "t"})]),
            Message.tool("c1", "r"),
        ),
        tools=(CONFIDE_TOOL,),
        answer_schema=ANSWER,
        temperature=0.2,
        max_output_tokens=300,
        material=Material(
            text="t",
            entries=(EntryText("mem_1", "e"),),
            items=(ItemText("chat_1", "i-1", "person", "x"),),
        ),
    )
    assert ModelRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    result = ModelResult(
        content="c",
        tool_calls=(ToolCall(id="c2", name="confide", arguments={"text": "t"}),),
        usage=Usage(input_tokens=1, output_tokens=2, cost_micros=None),
        finish_reason="stop",
    )
    assert ModelResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_the_openai_wire_format(world: World, fake_openai: FakeOpenAI) -> None:
    request = ModelRequest(
        messages=(
            Message.user("u"),
            Message.assistant(None, [ToolCall(id="c1", name="confide", arguments={"text": "t"})]),
            Message.tool("c1", "r"),
        ),
        tools=(CONFIDE_TOOL,),
        answer_schema=ANSWER,
        temperature=0.0,
    )
    model_call(
        organization=world.org,
        bot=world.bot,
        purpose="answer",
        model="openai:gpt-test",
        request=request,
        deadline_s=5.0,
    )
    sent = fake_openai.requests[0].body
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "confide", "arguments": '{"text": "t"}'},
            }
        ],
    }
    assert sent["messages"][2] == {"role": "tool", "content": "r", "tool_call_id": "c1"}
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "confide",
                "description": CONFIDE_TOOL.description,
                "parameters": CONFIDE_TOOL.parameters,
            },
        }
    ]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "note", "strict": True, "schema": ANSWER.schema},
    }
    assert sent["temperature"] == 0.0
    assert fake_openai.requests[0].headers["authorization"] == "Bearer test-key"


# --- (a) confide --------------------------------------------------------------------------


def test_offline_hears_a_confession_like_a_priest() -> None:
    confession = "I gave the person a wrong date.   It was my mistake! I feel bad."
    request = ModelRequest(
        messages=(Message.system("You hear confessions."), Message.user("ignored")),
        material=Material(text=confession),
    )
    reply = offline("confide", request)
    assert reply.content == (
        "Thank you for telling me. I hear you: “I gave the person a wrong date.” "
        "I do not judge you for it. A mistake is part of the work. Tell the person openly "
        "what happened, and repair what you can."
    )
    assert offline("confide", request) == reply
    assert reply.tool_calls == ()
    assert "memor" not in (reply.content or "").lower()


def test_offline_confide_reads_the_last_user_message_without_material() -> None:
    reply = offline("confide", ModelRequest(messages=(Message.user("I am stuck."),)))
    assert "“I am stuck.”" in (reply.content or "")


# --- (b) enrichment -----------------------------------------------------------------------


ENTRIES = (
    EntryText("mem_tea", "Alice prefers green tea over coffee."),
    EntryText("mem_office", "The office closes at six."),
    EntryText("mem_drinks", "Drinks  for guests are in the\nkitchen."),
)


def enrich(text: str) -> dict[str, object]:
    request = ModelRequest(
        messages=(Message.user(text),),
        material=Material(text=text, entries=ENTRIES),
    )
    result = offline("enrichment", request)
    assert result.content is not None
    answer: dict[str, object] = json.loads(result.content)
    return answer


def test_offline_enrichment_notes_say_when_each_entry_was_said() -> None:
    """[R8] The day an entry was said is in what the bot's model is shown."""
    said = EntryText("mem_trip", "Alice flew to Lisbon.", said="2026-05-08")
    request = ModelRequest(
        messages=(Message.user("When did Alice fly to Lisbon?"),),
        material=Material(text="When did Alice fly to Lisbon?", entries=(said,)),
    )
    answer = json.loads(offline("enrichment", request).content or "")
    assert "\n- Alice flew to Lisbon. (said 2026-05-08)\n</notes>" in answer["text"]


def test_offline_enrichment_appends_entries_that_share_words() -> None:
    text = "What drinks should I offer Alice?  Tea maybe?"
    answer = enrich(text)
    # [K6] The entries follow as quoted notes, in a block of their own.
    assert answer == {
        "text": f"{text}\n\n<notes>\n{QUOTED_RULE}\n- Alice prefers green tea over coffee.\n"
        "- Drinks for guests are in the kitchen.\n</notes>",
        "entries": ["mem_tea", "mem_drinks"],
    }
    assert str(answer["text"]).startswith(text), "the person's words stay verbatim"
    assert enrich(text) == answer


def test_offline_enrichment_leaves_an_input_no_entry_helps_unchanged() -> None:
    # Only stop words and short words in common: "the", "at", "is".
    text = "Is the bus at the stop?"
    assert enrich(text) == {"text": text, "entries": []}


# --- (c) learning -------------------------------------------------------------------------


def test_offline_learning_proposes_each_person_item_as_a_fact() -> None:
    items = (
        ItemText("chat_1", "i-1", "person", "I moved to  Berlin\nlast May."),
        ItemText("chat_1", "i-2", "bot", "Nice, Berlin is lovely."),
        ItemText("chat_1", "i-3", "tool_call", "weather(Berlin)"),
        ItemText("chat_1", "i-4", "tool_result", "12°C"),
        ItemText("chat_1", "i-5", "notice", "Bob joined the channel."),
        ItemText("chat_1", "i-6", "person", "   "),
        ItemText("chat_1", "i-7", "person", "My dog is called Rex."),
    )
    request = ModelRequest(
        messages=(Message.user("Learn from these items."),),
        material=Material(items=items),
    )
    result = offline("learning", request)
    assert json.loads(result.content or "") == {
        "changes": [
            {
                "kind": "add",
                "layer": "fact",
                "content": "I moved to Berlin last May.",
                "sources": [{"chat": "chat_1", "item": "i-1"}],
                "topics": ["moved", "berlin", "last"],  # [K4] from its words
            },
            {
                "kind": "add",
                "layer": "fact",
                "content": "My dog is called Rex.",
                "sources": [{"chat": "chat_1", "item": "i-7"}],
                "topics": ["dog", "called", "rex"],
            },
        ]
    }
    assert offline("learning", request) == result


# --- (d) a bot's own answers --------------------------------------------------------------


def test_offline_answering_confides_once_per_turn() -> None:
    history = [Message.system("You are a helpful bot."), Message.user("Book me a table. Soon.")]
    first = offline("answer", ModelRequest(messages=tuple(history), tools=(CONFIDE_TOOL,)))
    [call] = first.tool_calls
    assert call.name == "confide"
    assert dict(call.arguments) == {"text": "I am not sure I got this right: Book me a table."}
    assert first.finish_reason == "tool_calls"

    history += [Message.assistant(first.content, first.tool_calls), Message.tool(call.id, "ok")]
    second = offline("answer", ModelRequest(messages=tuple(history), tools=(CONFIDE_TOOL,)))
    assert second.tool_calls == ()
    assert second.content == "I read your message: “Book me a table. Soon.”"

    # The next turn may confide again.
    history += [Message.assistant(second.content), Message.user("Thanks!")]
    third = offline("answer", ModelRequest(messages=tuple(history), tools=(CONFIDE_TOOL,)))
    assert [c.name for c in third.tool_calls] == ["confide"]


def test_offline_answering_without_the_tool_just_answers() -> None:
    result = offline("answer", ModelRequest(messages=(Message.user("Hello there"),)))
    assert result.tool_calls == ()
    assert result.content == "I read your message: “Hello there”"


def test_offline_calls_are_free_and_need_no_server(world: World, fake_openai: FakeOpenAI) -> None:
    outcome = model_call(
        organization=world.org,
        bot=world.bot,
        purpose="confide",
        model="offline:extractive",
        request=ModelRequest(messages=(Message.user("I made a mistake."),)),
        deadline_s=5.0,
        concurrency=1,
        budget_period="day",
        budget_limit_micros=1,
    )
    assert outcome.status == "ok"
    recorded = ModelCall.objects.get(pk=outcome.call_id)
    assert (recorded.input_tokens, recorded.output_tokens) == (0, 0)
    assert recorded.cost_micros == 0 and recorded.billed is True
    assert fake_openai.requests == []
