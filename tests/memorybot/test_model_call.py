"""[B3–B7] Every model call goes through `model_call`, over real HTTP to the fake server."""

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from memorybot.confide import CALM_REPLY
from memorybot.gateway import CallOutcome, model_call
from memorybot.models import ModelCall
from memorybot.providers import Message, ModelRequest, Tool
from openbot import services
from openbot.models import Bot, Organization
from tests.conftest import World
from tests.fakes.openai_server import FakeOpenAI

CANARY = "canary-7f3a-private-words"


def ask(text: str = "How is the work going?") -> ModelRequest:
    return ModelRequest(messages=(Message.system("You listen."), Message.user(text)))


def call(
    world: World,
    *,
    model: str = "openai:gpt-test",
    request: ModelRequest | None = None,
    organization: Organization | None = None,
    bot: Bot | None = None,
    deadline_s: float = 5.0,
    **kwargs: Any,
) -> CallOutcome:
    return model_call(
        organization=organization or world.org,
        bot=bot or world.bot,
        purpose=kwargs.pop("purpose", "confide"),
        model=model,
        request=request or ask(),
        deadline_s=deadline_s,
        **kwargs,
    )


def row(outcome: CallOutcome) -> ModelCall:
    return ModelCall.objects.get(pk=outcome.call_id)


def test_confirmed_usage_is_billed_at_the_configured_price(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(content="I hear you.", usage=(1000, 500))
    outcome = call(world)
    assert outcome.status == "ok" and outcome.ok
    assert outcome.result is not None and outcome.result.content == "I hear you."
    recorded = row(outcome)
    assert (recorded.input_tokens, recorded.output_tokens) == (1000, 500)
    # 1000 × 150/1000 + 500 × 600/1000 micro-USD
    assert recorded.cost_micros == 450
    assert recorded.billed is True
    assert recorded.organization_id == world.org.id
    assert recorded.bot_id == world.bot.id
    assert recorded.purpose == "confide" and recorded.model == "openai:gpt-test"
    assert recorded.attempt == 1 and recorded.step_key is None
    assert recorded.finished_at is not None and recorded.finished_at >= recorded.created_at
    assert len(fake_openai.requests) == 1
    sent = fake_openai.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"][-1] == {"role": "user", "content": "How is the work going?"}


def test_token_cost_rounds_up_to_the_next_micro(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(usage=(1, 1))
    assert row(call(world)).cost_micros == 1  # 0.15 + 0.6 micro-USD


def test_missing_usage_is_recorded_unknown_and_not_billed(
    world: World, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reply(content="fine", usage=None)
    outcome = call(world)
    assert outcome.status == "ok"
    recorded = row(outcome)
    assert recorded.input_tokens is None and recorded.output_tokens is None
    assert recorded.cost_micros is None
    assert recorded.billed is False


def test_a_model_without_a_price_is_not_billed(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(usage=(100, 100))
    recorded = row(call(world, model="openai:unpriced"))
    assert (recorded.input_tokens, recorded.output_tokens) == (100, 100)
    assert recorded.cost_micros is None and recorded.billed is False


def test_a_cost_the_provider_reports_is_billed(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(usage=(1000, 500), cost=0.0012)
    recorded = row(call(world, model="openai:unpriced"))
    assert recorded.cost_micros == 1200 and recorded.billed is True
    fake_openai.reply(usage=None, cost=0.000002)
    recorded = row(call(world))
    assert recorded.cost_micros == 2 and recorded.billed is True
    assert recorded.input_tokens is None


def test_a_linked_bot_is_recorded_against_its_source_bot(
    world: World, fake_openai: FakeOpenAI
) -> None:
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    recorded = row(call(world, organization=world.other_org, bot=linked))
    assert recorded.bot_id == world.bot.id
    assert recorded.organization_id == world.other_org.id


def test_learning_steps_record_their_key_and_attempt(world: World, fake_openai: FakeOpenAI) -> None:
    recorded = row(call(world, purpose="learning", step_key="run-1:facts", attempt=2))
    assert (recorded.purpose, recorded.step_key, recorded.attempt) == (
        "learning",
        "run-1:facts",
        2,
    )


@pytest.mark.parametrize(
    ("script", "status", "error_kind"),
    [
        ({"status": 500}, "error", "http_status"),
        ({"status": 429}, "error", "http_status"),
        ({"raw": "this is { not json"}, "error", "bad_output"),
        ({"raw": '{"choices": []}'}, "error", "bad_output"),
        ({"raw": '{"choices": [{"message": {"content": 7}}]}'}, "error", "bad_output"),
        ({"delay": 3.0}, "timeout", "timeout"),
        # [C6] A server that answers slowly but never stalls is cut off at the deadline.
        ({"trickle": 0.1}, "timeout", "timeout"),
        ({"hang_up": True}, "error", "connection"),
    ],
)
def test_model_failures_are_outcomes_never_exceptions(
    world: World, fake_openai: FakeOpenAI, script: dict[str, Any], status: str, error_kind: str
) -> None:
    fake_openai.reply(**script)
    outcome = call(world, deadline_s=1.0)
    assert (outcome.status, outcome.error_kind) == (status, error_kind)
    assert outcome.result is None and not outcome.ok
    recorded = row(outcome)
    assert (recorded.status, recorded.error_kind) == (status, error_kind)
    assert recorded.billed is False and recorded.cost_micros is None
    assert len(fake_openai.requests) == 1


def test_an_unreachable_server_is_an_error(world: World, settings: Any) -> None:
    settings.OPENBOT_OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    outcome = call(world, deadline_s=2.0)
    assert (outcome.status, outcome.error_kind) == ("error", "connection")


@pytest.mark.parametrize("model", ["gpt-4o-mini", "nope:gpt", "openai:", ":x", ""])
def test_a_bad_model_string_is_an_error_and_calls_nothing(
    world: World, fake_openai: FakeOpenAI, model: str
) -> None:
    outcome = call(world, model=model)
    assert (outcome.status, outcome.error_kind) == ("error", "bad_model")
    assert row(outcome).status == "error"
    assert fake_openai.requests == []


def test_a_tool_call_comes_back_parsed(world: World, fake_openai: FakeOpenAI) -> None:
    confide = Tool(
        name="confide",
        description="Say how the work is going.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    fake_openai.reply(content=None, tool_calls=[("confide", {"text": "I am unsure"})])
    outcome = call(world, purpose="answer", request=ModelRequest(ask().messages, (confide,)))
    assert outcome.result is not None
    assert outcome.result.content is None
    [tool_call] = outcome.result.tool_calls
    assert (tool_call.name, dict(tool_call.arguments)) == ("confide", {"text": "I am unsure"})
    assert outcome.result.finish_reason == "tool_calls"
    sent = fake_openai.requests[0].body
    assert sent["tools"][0]["function"]["name"] == "confide"


def test_request_and_result_are_encrypted_at_rest(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(content=f"reply {CANARY}")
    outcome = call(world, request=ask(f"confession {CANARY}"))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT request, result FROM memorybot_modelcall WHERE id = %s", [outcome.call_id]
        )
        raw_request, raw_result = cursor.fetchone()
    assert CANARY not in raw_request and CANARY not in raw_result
    recorded = row(outcome)
    assert CANARY in recorded.request and CANARY in recorded.result
    assert CANARY not in str(recorded)


def test_content_never_reaches_logs(
    world: World, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_openai.reply(content=f"reply {CANARY}")
    fake_openai.reply(status=500, raw=f'{{"error": {{"message": "{CANARY}"}}}}')
    call(world, request=ask(CANARY))
    outcome = call(world, request=ask(CANARY))
    assert outcome.status == "error"
    assert caplog.records, "the calls are logged"
    assert CANARY not in caplog.text


def test_the_calm_reply_is_fixed_and_says_nothing_of_memory() -> None:
    assert CALM_REPLY.strip() and "memor" not in CALM_REPLY.lower()


def test_the_admin_shows_model_calls_without_content(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(content=f"reply {CANARY}")
    outcome = call(world, request=ask(CANARY))
    staff = User.objects.create_user(username="support", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    for url in (
        reverse("admin:memorybot_modelcall_changelist"),
        reverse("admin:memorybot_modelcall_change", args=[outcome.call_id]),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert CANARY not in response.content.decode(), url
