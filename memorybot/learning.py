"""Learning: a durable, resumable run per confided turn.

A confession stores a run for its turn. When the turn has ended (the shared event log
says so [W2]) a worker reads the chat's items after the chat's read position up to the end
of that turn, asks the model for structured changes in one recorded step, and applies
them in one transaction under the pool's write lock together with the new read position and
the end of the run. Every state lives in the database: broker messages carry run ids
only, and a delivery that finds the run done, claimed or not ready does nothing.
"""

import json
import logging
import time
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from chats.models import Chat, Event, Turn
from memory import services as memory
from memory.learned import learned_changes_apply_in
from memory.models import Change
from memorybot.broker import messages_held
from memorybot.budget import budget_period_end
from memorybot.duty import duty_for, reader_of_chat
from memorybot.gateway import CallOutcome, learning_step_deadline_s
from memorybot.learning_step import (
    bot_words,
    learning_range,
    learning_request,
    parse_changes,
    run_items_learnable,
)
from memorybot.models import LearningRun, ModelCall, ModelCallEntry
from memorybot.providers import ModelResult

logger = logging.getLogger(__name__)

STEP = "changes"
MAX_CLAIMS = 5
LEARNING_QUEUE = "learning"
# A message sent this recently may not be in the broker's sight yet: not lost.
LOST_AFTER_SECONDS = 2.0
# Giving a run back is tried this often, with growing waits (about 24 s in all): a
# database that restarts is back by then, and the run need not wait out its lease.
RELEASE_ATTEMPTS = 7


def learning_run_create(*, turn: Turn) -> LearningRun:
    """The run for a confided turn (one per turn, however often the bot confides)."""
    run, _ = LearningRun.objects.get_or_create(turn=turn, defaults={"chat_id": turn.chat_id})
    return run


def lease_seconds() -> float:
    """How long a worker holds a run: one step and a margin. After it, the run is free again."""
    return learning_step_deadline_s() + float(settings.OPENBOT_LEARNING_LEASE_MARGIN_SECONDS)


def runs_due(*, resend: bool = False) -> list[int]:
    """[F7] Runs whose wait is over (their turn ended; a budget wait passed) or whose worker
    died (its lease ran out): what the recovery pass re-enqueues. A run sent less than a lease
    ago is not sent again while the broker holds its message, so a backlog does not grow
    duplicates; one whose message the broker lost is (`resend`: every one)."""
    now = timezone.now()
    ended = Event.objects.filter(kind=Event.Kind.TURN_ENDED).values("turn_id")
    waiting = (
        LearningRun.objects.filter(turn_id__in=ended)
        .filter(Q(status=LearningRun.Status.WAITING) | Q(status=LearningRun.Status.RUNNING))
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
    )
    if resend:
        return list(waiting.values_list("id", flat=True))
    stale = now - timedelta(seconds=lease_seconds())
    due = list(
        waiting.filter(Q(sent_at__isnull=True) | Q(sent_at__lte=stale)).values_list("id", flat=True)
    )
    # Sent a moment ago: the run's key may not be written yet, or a worker has just taken it.
    queued = dict(
        waiting.filter(
            sent_at__gt=stale, sent_at__lte=now - timedelta(seconds=LOST_AFTER_SECONDS)
        ).values_list("message_key", "id")
    )
    held = messages_held(LEARNING_QUEUE, queued)
    return due + [run_id for key, run_id in queued.items() if key not in held]


def _claim(run_id: int) -> datetime | None:
    """Take the run for this worker until the lease ends, and return the lease; None if the
    run is done, leased or waiting."""
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    claimed = (
        LearningRun.objects.filter(
            id=run_id,
            status__in=[LearningRun.Status.WAITING, LearningRun.Status.RUNNING],
        )
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
        # The message that brought the run here is used up: recovery may send a new one
        # once this lease ends or the run waits for a budget period.
        .filter(claims__lt=MAX_CLAIMS)
        .update(
            status=LearningRun.Status.RUNNING,
            leased_until=lease,
            not_before=None,
            sent_at=None,
            claims=F("claims") + 1,
        )
    )
    return lease if claimed else None


def runs_give_up() -> int:
    """End, with a safe error, runs whose workers kept dying or failing on them: after
    MAX_CLAIMS claims without progress. Their read position stays, so a later confide asks
    to learn from that evidence again."""
    return (
        LearningRun.objects.filter(
            status__in=[LearningRun.Status.WAITING, LearningRun.Status.RUNNING],
            claims__gte=MAX_CLAIMS,
        )
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=timezone.now()))
        .update(
            status=LearningRun.Status.FAILED,
            error=LearningRun.Error.GAVE_UP,
            leased_until=None,
            finished_at=timezone.now(),
        )
    )


def _held(run: LearningRun, lease: datetime | None) -> QuerySet[LearningRun]:
    """The run, if it is still running under `lease`. The lease is this worker's token: a
    worker whose lease ran out and whose run another worker claimed (a new lease) changes
    nothing any more, so two deliveries never both call the model or both end the run."""
    held = LearningRun.objects.filter(id=run.id, status=LearningRun.Status.RUNNING)
    return held if lease is None else held.filter(leased_until=lease)


def _renew(run: LearningRun, lease: datetime) -> datetime | None:
    """Hold the run for one more step from now, if it is still ours (right before the model
    call: waiting for the pool's read lock may have used up the lease)."""
    renewed = timezone.now() + timedelta(seconds=lease_seconds())
    if not _held(run, lease).update(leased_until=renewed):
        return None
    run.leased_until = renewed
    return renewed


def _finish(run: LearningRun, lease: datetime | None, status: str, error: str = "") -> None:
    run.status = status
    run.error = error
    run.leased_until = None
    run.finished_at = timezone.now()
    _held(run, lease).update(
        status=status,
        error=error,
        leased_until=None,
        finished_at=run.finished_at,
        refusals=run.refusals,
        applied=run.applied,
    )


def learning_run_process(*, run_id: int) -> None:
    """Advance one run as far as it can go now; safe to call any number of times."""
    run = LearningRun.objects.select_related("chat", "turn").filter(id=run_id).first()
    if run is None or run.status in (LearningRun.Status.DONE, LearningRun.Status.FAILED):
        return
    if not Event.objects.filter(kind=Event.Kind.TURN_ENDED, turn_id=run.turn_id).exists():
        return  # the turn has not ended: the turn's end enqueues the run again
    lease = _claim(run_id)
    if lease is None:
        return
    run.refresh_from_db()
    try:
        _advance(run, lease)
    except BaseException:
        _release(run)
        raise


def _release(run: LearningRun) -> None:
    """Give back a run whose delivery failed (the database busy past its timeout, or
    restarting), so the next delivery — Dramatiq's retry, the recovery pass — takes it at once
    instead of after the lease. The write is tried again on a new connection for about 24 s;
    should it still fail, the lease runs out as after a crash. Each claim counts towards
    MAX_CLAIMS, so a run that keeps failing ends failed."""
    if run.leased_until is None:
        return  # the run was ending: this worker no longer knows its lease
    error = ""
    for attempt in range(RELEASE_ATTEMPTS):
        if attempt:
            connection.close()  # a lost connection is not used again
            time.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
        try:
            _held(run, run.leased_until).update(leased_until=None)
            return
        except DatabaseError as exc:
            error = type(exc).__name__
            if connection.in_atomic_block:
                break  # a statement that failed in a transaction cannot be tried again in it
    logger.warning("learning run %s: not given back (%s)", run.id, error)


def _advance(run: LearningRun, lease: datetime) -> None:
    """The claimed run's step and apply; `run.leased_until` follows this worker's lease."""
    chat = Chat.objects.select_related("bot__source", "organization", "channel").get(id=run.chat_id)
    duty = duty_for(chat)
    if not duty.learning_on or duty.model is None:
        _finish(run, lease, LearningRun.Status.DONE, LearningRun.Error.LEARNING_OFF)
        return
    if run.start_seq is None:
        run.start_seq = chat.read_position
        run.end_seq = run.turn.end_seq
        if not _held(run, lease).update(start_seq=run.start_seq, end_seq=run.end_seq):
            return
    if run.end_seq is None or run.start_seq >= run.end_seq:
        _finish(run, lease, LearningRun.Status.DONE)
        return
    result = _recorded_result(run)
    if result is None and not run_items_learnable(run, chat):
        apply_learning(run=run, changes=[], lease=lease)  # nothing learnable: no model call
        return
    if result is None:
        request = learning_request(run, chat, duty.instructions)
        renewed = _renew(run, lease)
        if renewed is None:
            return  # another worker took the run over while this one waited to read the pool
        lease = renewed
        outcome = duty.call(
            purpose="learning",
            request=request,
            deadline_s=learning_step_deadline_s(),
            step_key=_step_key(run),
            attempt=ModelCall.objects.filter(step_key=_step_key(run)).count() + 1,
        )
        if outcome.status == ModelCall.Status.BUDGET and duty.budget_period is not None:
            # [B4] Learning waits until the next period.
            _held(run, lease).update(
                status=LearningRun.Status.WAITING,
                not_before=budget_period_end(duty.budget_period, timezone.now()),
                leased_until=None,
                claims=0,  # waiting for money is not a failure
            )
            return
        if not outcome.ok or outcome.result is None:
            # [B6] A step that failed or passed its limit ends the run safely; the read position
            # stays, so a later confide learns from this evidence again.
            _finish(run, lease, LearningRun.Status.FAILED, _cause(outcome))
            return
        result = outcome.result
    changes = parse_changes(result.content)
    if changes is None:
        _finish(run, lease, LearningRun.Status.FAILED, LearningRun.Error.BAD_OUTPUT)
        return
    apply_learning(run=run, changes=changes, lease=lease)


def _cause(outcome: CallOutcome) -> str:
    """The code of why a learning step's model call gave no answer."""
    if outcome.ok:
        # It answered, but an entry it was shown was purged meanwhile: the answer may
        # carry what was purged and is not used.
        return LearningRun.Error.PURGED
    if outcome.status == ModelCall.Status.ERROR:
        if outcome.error_kind in (LearningRun.Error.BAD_MODEL, LearningRun.Error.BAD_OUTPUT):
            return outcome.error_kind
        return LearningRun.Error.MODEL_ERROR
    codes: dict[str, str] = {
        ModelCall.Status.TIMEOUT: LearningRun.Error.TIMEOUT,
        ModelCall.Status.NO_SLOT: LearningRun.Error.NO_SLOT,
        ModelCall.Status.BUDGET: LearningRun.Error.BUDGET,
    }
    return codes.get(outcome.status, LearningRun.Error.MODEL_ERROR)


def _step_key(run: LearningRun) -> str:
    return f"learning:{run.id}:{STEP}"


def _recorded_result(run: LearningRun) -> ModelResult | None:
    """[W3] A step that completed is never called (or billed) again: reuse its result.
    Only the result is read: the request (the items and up to 300 entries) is not decrypted.
    A result blanked by a purge or retention is gone: the step is asked again."""
    result = (
        ModelCall.objects.filter(
            step_key=_step_key(run), status=ModelCall.Status.OK, blanked_at__isnull=True
        )
        .order_by("attempt")
        .values_list("result", flat=True)
        .first()
    )
    if result is None:
        return None
    return ModelResult.from_json(json.loads(result))


def apply_learning(*, run: LearningRun, changes: list[Any], lease: datetime | None = None) -> None:
    """[W4] Apply what may be applied, refuse the rest per change, advance the read
    position and end the run — one transaction under the pool's write lock.

    Applies nothing if the run has ended meanwhile, or (with `lease`) if another worker has
    claimed it since: a delivery whose lease ran out while it waited for the lock must not
    apply the same answer a second time."""
    chat = Chat.objects.select_related("bot__source", "organization", "channel").get(id=run.chat_id)
    said = bot_words(run)  # read before the lock: decryption never holds it
    with memory.pool_change(pool_id=chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as change:
        if _held(run, lease).select_for_update().values_list("id", flat=True).first() is None:
            return
        # The newest read position, locked: evidence another run applied is never applied again.
        position = Chat.objects.select_for_update().values_list("read_position", flat=True)
        read_position = position.get(id=chat.id)
        refusals = learned_changes_apply_in(
            change,
            proposals=changes,
            within=learning_range(
                run,
                chat,
                first_seq=max(read_position, run.start_seq or 0) + 1,
                bot_words=said,
            ),
            reader=reader_of_chat(chat, run.turn.person_id),
        )
        # The step's answer carries the content of the entries it created or changed.
        ModelCallEntry.objects.bulk_create(
            [
                ModelCallEntry(call_id=call_id, entry_id=entry_id)
                for call_id in ModelCall.objects.filter(
                    step_key=_step_key(run), blanked_at__isnull=True
                ).values_list("id", flat=True)
                for entry_id in change.touched
            ],
            ignore_conflicts=True,
        )
        if run.end_seq is not None and run.end_seq > read_position:
            Chat.objects.filter(id=chat.id).update(read_position=run.end_seq)
        run.refusals = [asdict(refusal) for refusal in refusals]
        run.applied = len(changes) - len(refusals)
        _finish(run, lease, LearningRun.Status.DONE)
    if refusals:
        logger.info("learning run %s: %d change(s) refused", run.id, len(refusals))
