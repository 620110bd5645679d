"""[W2] The recovery pass: end turns their process left open, re-enqueue every
learning run whose wait is over, whose worker died or whose message the broker lost, and once a
day blank model calls older than the retention. Workers run it on start and every
OPENBOT_RECOVERY_SECONDS (`memorybot.worker`); operators run it as `manage.py recover_learning`."""

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chats.services import turns_end_abandoned
from memorybot.learning import runs_due, runs_give_up
from memorybot.purge import model_calls_prune
from memorybot.tasks import learning_send

logger = logging.getLogger(__name__)

DAY_SECONDS = 86_400.0
# [C6] A turn still open this long after its deadline lost the process that served it.
ABANDONED_AFTER_DEADLINE_SECONDS = 60.0


def recover_learning(*, resend: bool = False) -> int:
    """End abandoned turns and re-enqueue every run that is due (`resend`: every waiting run,
    queued or not); returns how many runs."""
    abandoned = turns_end_abandoned(
        started_before=timezone.now()
        - timedelta(
            seconds=settings.OPENBOT_TURN_DEADLINE_SECONDS + ABANDONED_AFTER_DEADLINE_SECONDS
        )
    )
    if abandoned:
        logger.warning("recovery: ended %d turn(s) their process left open", abandoned)
    runs_give_up()
    run_ids = runs_due(resend=resend)
    for run_id in run_ids:
        learning_send(run_id)
    return len(run_ids)


def prune_model_calls_daily(last: float | None) -> float | None:
    """Blank model calls older than the retention, if it is set and this process has
    not pruned in the last day (`last`: when it did, on the monotonic clock). Returns when
    this process last pruned."""
    days = settings.OPENBOT_MODEL_CALL_RETENTION_DAYS
    now = time.monotonic()
    if days is None or (last is not None and now - last < DAY_SECONDS):
        return last
    blanked = model_calls_prune(older_than_days=days)
    logger.info("model call retention: blanked %d call(s) older than %d day(s)", blanked, days)
    return now
