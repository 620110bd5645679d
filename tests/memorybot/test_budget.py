"""[B4] A spent budget stops the call before any request reaches the model."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from pytest_django.fixtures import Settings

from memorybot.budget import (
    Price,
    budget_exhausted,
    budget_period_end,
    budget_period_start,
    call_cost,
    model_prices,
)
from memorybot.gateway import CallOutcome, model_call
from memorybot.models import ModelCall
from memorybot.providers import Message, ModelRequest, Usage
from openbot import services
from openbot.models import Bot, Organization
from tests.conftest import World
from tests.fakes.openai_server import FakeOpenAI

REQUEST = ModelRequest(messages=(Message.user("hello"),))


def spend(
    organization: Organization,
    bot: Bot,
    *,
    period: str | None = None,
    limit: int | None = None,
    model: str = "openai:gpt-test",
) -> CallOutcome:
    return model_call(
        organization=organization,
        bot=bot,
        purpose="enrichment",
        model=model,
        request=REQUEST,
        deadline_s=5.0,
        budget_period=period,  # type: ignore[arg-type]
        budget_limit_micros=limit,
    )


@pytest.mark.parametrize("period", ["day", "month"])
def test_a_spent_budget_stops_calls_from_every_organization(
    world: World, fake_openai: FakeOpenAI, period: str
) -> None:
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    fake_openai.reply(usage=(1000, 1000))  # 750 micro-USD, paid by the other organization
    first = spend(world.other_org, linked, period=period, limit=700)
    assert first.status == "ok"
    assert ModelCall.objects.get(pk=first.call_id).cost_micros == 750

    blocked = spend(world.org, world.bot, period=period, limit=700)
    assert blocked.status == "budget" and blocked.result is None
    assert len(fake_openai.requests) == 1, "no request reached the model"
    recorded = ModelCall.objects.get(pk=blocked.call_id)
    assert recorded.status == "budget" and recorded.billed is False
    assert recorded.organization_id == world.org.id

    # A higher limit, or none, lets calls through again.
    assert spend(world.org, world.bot, period=period, limit=751).status == "ok"
    assert spend(world.org, world.bot).status == "ok"
    assert len(fake_openai.requests) == 3


def test_a_budget_counts_only_confirmed_cost(world: World, fake_openai: FakeOpenAI) -> None:
    for _ in range(3):
        fake_openai.reply(usage=None)
        assert spend(world.org, world.bot, period="day", limit=1).status == "ok"
    assert len(fake_openai.requests) == 3


def test_a_budget_is_per_bot(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(usage=(1000, 1000))
    spend(world.org, world.bot, period="day", limit=100)
    assert spend(world.org, world.bot, period="day", limit=100).status == "budget"
    other_bot = services.bot_create(organization=world.org)
    assert spend(world.org, other_bot, period="day", limit=100).status == "ok"


def test_a_limit_of_zero_allows_no_call(world: World, fake_openai: FakeOpenAI) -> None:
    assert spend(world.org, world.bot, period="month", limit=0).status == "budget"
    assert fake_openai.requests == []


def test_spend_before_the_period_does_not_count(world: World, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(usage=(1000, 1000))
    paid = spend(world.org, world.bot)
    now = timezone.now()
    day_start = budget_period_start("day", now)
    month_start = budget_period_start("month", now)

    ModelCall.objects.filter(pk=paid.call_id).update(created_at=day_start - timedelta(seconds=1))
    assert spend(world.org, world.bot, period="day", limit=700).status == "ok"
    # Yesterday is in this month unless today is the first.
    expected = "budget" if day_start > month_start else "ok"
    assert spend(world.org, world.bot, period="month", limit=700).status == expected

    ModelCall.objects.exclude(pk=paid.call_id).delete()
    ModelCall.objects.filter(pk=paid.call_id).update(created_at=month_start - timedelta(seconds=1))
    assert spend(world.org, world.bot, period="month", limit=700).status == "ok"
    assert not budget_exhausted(bot_id=world.bot.id, period="month", limit_micros=700)
    assert budget_exhausted(
        bot_id=world.bot.id, period="month", limit_micros=700, now=month_start - timedelta(hours=1)
    )


def test_period_boundaries_are_utc() -> None:
    moment = datetime(2025, 12, 31, 23, 30, tzinfo=UTC)
    assert budget_period_start("day", moment) == datetime(2025, 12, 31, tzinfo=UTC)
    assert budget_period_start("month", moment) == datetime(2025, 12, 1, tzinfo=UTC)
    assert budget_period_end("day", moment) == datetime(2026, 1, 1, tzinfo=UTC)
    assert budget_period_end("month", moment) == datetime(2026, 1, 1, tzinfo=UTC)
    assert budget_period_end("month", datetime(2025, 2, 10, tzinfo=UTC)) == datetime(
        2025, 3, 1, tzinfo=UTC
    )
    # 00:30 in Berlin (UTC+1) is still the previous UTC day.
    berlin = datetime(2025, 3, 1, 0, 30, tzinfo=timezone.get_fixed_timezone(60))
    assert budget_period_start("month", berlin) == datetime(2025, 2, 1, tzinfo=UTC)


def test_prices_are_read_from_settings(settings: Settings) -> None:
    settings.OPENBOT_MODEL_PRICES = " openai:a=150/600 , openai:llama3:8b=0.5/1.25,"
    assert model_prices() == {
        "openai:a": Price(Decimal(150), Decimal(600)),
        "openai:llama3:8b": Price(Decimal("0.5"), Decimal("1.25")),
    }
    usage = Usage(input_tokens=2000, output_tokens=1000)
    assert call_cost(model="openai:llama3:8b", usage=usage).micros == 3  # 1 + 1.25 → 3
    assert call_cost(model="openai:a", usage=None).billed is False


@pytest.mark.parametrize("raw", ["gpt=1/2", "openai:a=1", "openai:a=x/2", "openai:a=-1/2"])
def test_malformed_prices_fail_loudly(settings: Settings, raw: str) -> None:
    settings.OPENBOT_MODEL_PRICES = raw
    with pytest.raises(ImproperlyConfigured, match="OPENBOT_MODEL_PRICES"):
        model_prices()
