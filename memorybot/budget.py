"""[B3, B4] What a model call costs, and what a bot has spent in its budget period.

Prices come from `OPENBOT_MODEL_PRICES`: `"<provider>:<model>=<input>/<output>,..."` in
micro-USD per 1,000 tokens, e.g. `"openai:gpt-4o-mini=150/600"`. Decimals are allowed.
"""

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Sum
from django.utils import timezone

from memorybot.models import ModelCall
from memorybot.providers import Usage

BudgetPeriod = Literal["day", "month"]
BUDGET_PERIODS: tuple[BudgetPeriod, ...] = ("day", "month")


@dataclass(frozen=True)
class Price:
    """Micro-USD per 1,000 input and per 1,000 output tokens."""

    input_per_1k: Decimal
    output_per_1k: Decimal


@dataclass(frozen=True)
class Cost:
    """A call's cost: `micros` None is unknown, and only a known cost is `billed`."""

    micros: int | None
    billed: bool


@lru_cache(maxsize=4)
def _parse_prices(raw: str) -> dict[str, Price]:
    prices: dict[str, Price] = {}
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        model, sep, pair = part.rpartition("=")
        input_price, slash, output_price = pair.partition("/")
        try:
            price = Price(Decimal(input_price.strip()), Decimal(output_price.strip()))
        except InvalidOperation:
            price = None
        if (
            not sep
            or not slash
            or ":" not in model
            or price is None
            or not (price.input_per_1k.is_finite() and price.output_per_1k.is_finite())
            or price.input_per_1k < 0
            or price.output_per_1k < 0
        ):
            raise ImproperlyConfigured(
                "OPENBOT_MODEL_PRICES must be '<provider>:<model>=<input>/<output>,...' in "
                f"micro-USD per 1,000 tokens; cannot read {part[:80]!r}"
            )
        prices[model.strip()] = price
    return prices


def model_prices() -> dict[str, Price]:
    """The configured prices by model string; a malformed setting fails loudly."""
    return _parse_prices(settings.OPENBOT_MODEL_PRICES or "")


def call_cost(*, model: str, usage: Usage | None) -> Cost:
    """Bill only what the provider confirmed: its reported cost, else tokens × price.

    Missing usage, a missing token count, or a model without a configured price → unknown.
    Token costs are rounded up to the next micro-USD.
    """
    if usage is None:
        return Cost(micros=None, billed=False)
    if usage.cost_micros is not None:
        return Cost(micros=usage.cost_micros, billed=True)
    price = model_prices().get(model)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return Cost(micros=None, billed=False)
    total = (
        usage.input_tokens * price.input_per_1k + usage.output_tokens * price.output_per_1k
    ) / 1000
    return Cost(micros=math.ceil(total), billed=True)


def budget_period_start(period: BudgetPeriod, now: datetime) -> datetime:
    """The start (UTC) of the day or month that `now` falls in."""
    moment = now.astimezone(UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "month":
        return day.replace(day=1)
    raise ValueError(f"a budget period is one of {BUDGET_PERIODS}")


def budget_period_end(period: BudgetPeriod, now: datetime) -> datetime:
    """When the period that `now` falls in ends: learning waits until then."""
    start = budget_period_start(period, now)
    if period == "day":
        return start + timedelta(days=1)
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)


def budget_spent_micros(*, bot_id: str, since: datetime) -> int:
    """Confirmed cost of the memory bot's calls since `since`, across all organizations.

    The bot's own answers (purpose `answer`) are recorded too but are not the memory bot's
    spend, so the memory-bot budget does not count them."""
    calls = ModelCall.objects.filter(bot_id=bot_id, billed=True, created_at__gte=since).exclude(
        purpose=ModelCall.Purpose.ANSWER
    )
    total = calls.aggregate(total=Sum("cost_micros"))["total"]
    return int(total or 0)


def budget_exhausted(
    *,
    bot_id: str,
    period: BudgetPeriod | None,
    limit_micros: int | None,
    now: datetime | None = None,
) -> bool:
    """Whether the bot's confirmed spend this UTC day/month has reached its limit.

    No period or no limit means no budget. Calls still running are not counted yet, so
    concurrent calls can overshoot the limit by what they cost.
    """
    if period is None or limit_micros is None:
        return False
    since = budget_period_start(period, now or timezone.now())
    return budget_spent_micros(bot_id=bot_id, since=since) >= limit_micros
