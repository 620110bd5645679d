"""The one door every model call goes through: budget, task slot, deadline, provider, and
the record of the call with its confirmed cost.

`model_call` never raises for anything the model side does (an unknown model, a spent budget,
no free slot, a timeout, an HTTP error, unusable output): it returns an outcome, and the caller
falls back — the calm reply, the unchanged input, a learning step that ends safely. Neither
content nor provider messages reach logs or exceptions.

Call it outside any transaction and outside the memory lock: it waits on the network.
"""

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from memorybot.budget import BUDGET_PERIODS, BudgetPeriod, budget_exhausted, call_cost
from memorybot.models import ModelCall
from memorybot.providers import (
    ModelRequest,
    ModelResult,
    ProviderError,
    Usage,
    provider_for,
)
from memorybot.purge import model_call_store
from memorybot.slots import task_slot
from openbot.model_names import ModelNameError, parse_model
from openbot.models import Bot, Organization

logger = logging.getLogger(__name__)

Status = ModelCall.Status


@dataclass(frozen=True)
class CallOutcome:
    """How a call ended. `result` is set only when `status` is `ok` (and not when an entry
    the call carried was purged while it ran); `call_id` is the `ModelCall` row
    recorded for it."""

    status: str
    call_id: int
    result: ModelResult | None = None
    error_kind: str = ""

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


def model_call(
    *,
    organization: Organization,
    bot: Bot,
    purpose: str,
    model: str,
    request: ModelRequest,
    deadline_s: float,
    concurrency: int | None = None,
    budget_period: BudgetPeriod | None = None,
    budget_limit_micros: int | None = None,
    step_key: str | None = None,
    attempt: int = 1,
    chat_id: str | None = None,
    entry_ids: Sequence[str] = (),
) -> CallOutcome:
    """Make one recorded model call for `bot`'s memory pool, paid by `organization`.

    `deadline_s` counts from now and includes the wait for a slot. `concurrency`,
    `budget_period` and `budget_limit_micros` are the pool's settings (None: no limit).
    A linked bot counts as its source bot.

    `chat_id` is the chat the call is made for; the call carries the content of the
    entries in `request.material` and of `entry_ids` (an input rewritten from entries). Both
    are recorded with the call, so a purge or a history deletion finds it without decrypting.
    """
    if purpose not in ModelCall.Purpose.values:
        raise ValueError(f"purpose must be one of {ModelCall.Purpose.values}")
    if budget_period is not None and budget_period not in BUDGET_PERIODS:
        raise ValueError(f"budget_period must be one of {BUDGET_PERIODS} or None")
    deadline_at = time.monotonic() + deadline_s
    call = ModelCall(
        organization_id=organization.pk,
        bot_id=bot.pool_bot_id,
        purpose=purpose,
        model=model[:200],
        request=json.dumps(request.to_json(), ensure_ascii=False),
        step_key=step_key,
        attempt=attempt,
        created_at=timezone.now(),
        chat_id=chat_id,
    )
    shown = request.material.entries if request.material is not None else ()
    call.carried = (*entry_ids, *(entry.id for entry in shown))

    try:
        provider = provider_for(parse_model(model))
    except ModelNameError:
        return _record(call, Status.ERROR, error_kind="bad_model")

    def spent() -> bool:
        return budget_exhausted(
            bot_id=call.bot_id, period=budget_period, limit_micros=budget_limit_micros
        )

    if spent():
        return _record(call, Status.BUDGET)
    with task_slot(bot_id=call.bot_id, concurrency=concurrency, deadline_at=deadline_at) as held:
        if not held:
            return _record(call, Status.NO_SLOT)
        # Calls that finished while this one waited may have spent the rest.
        if concurrency is not None and spent():
            return _record(call, Status.BUDGET)
        left = deadline_at - time.monotonic()
        if left <= 0:
            return _record(call, Status.NO_SLOT if concurrency is not None else Status.TIMEOUT)
        try:
            result = provider.complete(purpose=purpose, request=request, timeout_s=left)
        except ProviderError as exc:
            status = Status.TIMEOUT if exc.kind == "timeout" else Status.ERROR
            return _record(call, status, error_kind=exc.kind, usage=exc.usage)
        except Exception as exc:  # a provider bug must not break the turn; no message logged
            logger.error("model call: the provider raised %s", type(exc).__name__)
            return _record(call, Status.ERROR, error_kind="provider_bug")
        # An answer after the deadline is not used, but what it cost is still billed.
        late = time.monotonic() > deadline_at
        return _record(
            call,
            Status.TIMEOUT if late else Status.OK,
            result=result,
            error_kind="late" if late else "",
        )


def _record(
    call: ModelCall,
    status: str,
    *,
    result: ModelResult | None = None,
    error_kind: str = "",
    usage: Usage | None = None,
) -> CallOutcome:
    """Store the call. `usage` is what an answer without a usable `result` cost."""
    call.status = status
    call.error_kind = error_kind
    call.finished_at = timezone.now()
    if result is not None:
        call.result = json.dumps(result.to_json(), ensure_ascii=False)
        usage = result.usage
    if usage is not None:
        call.input_tokens = usage.input_tokens
        call.output_tokens = usage.output_tokens
        cost = call_cost(model=call.model, usage=usage)
        call.cost_micros = cost.micros
        call.billed = cost.billed
    kept = model_call_store(call)
    logger.info(
        "model call %s: bot=%s organization=%s purpose=%s status=%s%s",
        call.pk,
        call.bot_id,
        call.organization_id,
        call.purpose,
        status,
        f" ({error_kind})" if error_kind else "",
    )
    return CallOutcome(
        status=status,
        call_id=call.pk,
        result=result if status == Status.OK and kept else None,
        error_kind=error_kind,
    )


def reply_deadline_s() -> float:
    """[B6] How long a confide reply or an enrichment may take, slot wait included."""
    return float(settings.OPENBOT_REPLY_DEADLINE_SECONDS)


def learning_step_deadline_s() -> float:
    """How long one learning step may take."""
    return float(settings.OPENBOT_LEARNING_STEP_SECONDS)
