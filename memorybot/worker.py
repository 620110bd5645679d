"""[W2] Where learning runs: an in-process worker by default, `rundramatiq` in production,
and the recovery pass that re-enqueues runs whose wait is over or whose worker died — on
worker start, every OPENBOT_RECOVERY_SECONDS, and as `manage.py recover_learning`. The same
loop prunes old model calls once a day when OPENBOT_MODEL_CALL_RETENTION_DAYS is set [P5]."""

import logging
import os
import threading
import time
from datetime import timedelta
from typing import Any

import dramatiq
from django.conf import settings
from django.utils import timezone

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_inprocess: dramatiq.Worker | None = None

DAY_SECONDS = 86_400.0


# [C6] A turn still open this long after its deadline lost the process that served it.
ABANDONED_AFTER_DEADLINE_SECONDS = 60.0


def recover_learning() -> int:
    """End abandoned turns and re-enqueue every run that is due; returns how many runs."""
    from chats.services import turns_end_abandoned
    from memorybot.learning import runs_due, runs_give_up
    from memorybot.tasks import learning_send

    abandoned = turns_end_abandoned(
        started_before=timezone.now()
        - timedelta(
            seconds=settings.OPENBOT_TURN_DEADLINE_SECONDS + ABANDONED_AFTER_DEADLINE_SECONDS
        )
    )
    if abandoned:
        logger.warning("recovery: ended %d turn(s) their process left open", abandoned)
    runs_give_up()
    run_ids = runs_due()
    for run_id in run_ids:
        learning_send(run_id)
    return len(run_ids)


def prune_model_calls_daily(last: float | None) -> float | None:
    """[P5] Blank model calls older than the retention, if it is set and this process has
    not pruned in the last day (`last`: when it did, on the monotonic clock). Returns when
    this process last pruned."""
    from memorybot.purge import model_calls_prune

    days = settings.OPENBOT_MODEL_CALL_RETENTION_DAYS
    now = time.monotonic()
    if days is None or (last is not None and now - last < DAY_SECONDS):
        return last
    blanked = model_calls_prune(older_than_days=days)
    logger.info("model call retention: blanked %d call(s) older than %d day(s)", blanked, days)
    return now


class LearningRecovery(dramatiq.Middleware):
    """Runs the recovery pass when a worker boots and then on a schedule."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        stop = threading.Event()
        worker.openbot_recovery_stop = stop  # type: ignore[attr-defined]
        thread = threading.Thread(
            target=self._loop, args=(stop,), name="openbot-recovery", daemon=True
        )
        thread.start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        stop = getattr(worker, "openbot_recovery_stop", None)
        if stop is not None:
            stop.set()

    @staticmethod
    def _loop(stop: threading.Event) -> None:
        from django.db import close_old_connections, connection

        pruned_at: float | None = None
        while not stop.is_set():
            try:
                count = recover_learning()
                if count:
                    logger.info("learning recovery: re-enqueued %d run(s)", count)
                pruned_at = prune_model_calls_daily(pruned_at)
            except Exception as exc:  # the next pass tries again
                logger.warning("recovery pass failed: %s", type(exc).__name__)
            finally:
                close_old_connections()
                connection.close()
            stop.wait(settings.OPENBOT_RECOVERY_SECONDS)


def ensure_inprocess_worker(**options: Any) -> None:
    """Start a worker in this process on the configured broker, with its recovery pass, once,
    when OPENBOT_INPROCESS_WORKER is set (the default: no broker to install). The serving
    process calls it when it creates the WSGI application [G2]: openbot/wsgi.py."""
    global _inprocess
    if not settings.OPENBOT_INPROCESS_WORKER:
        return
    with _lock:
        if _inprocess is None:
            _inprocess = dramatiq.Worker(
                dramatiq.get_broker(),
                worker_threads=settings.OPENBOT_INPROCESS_WORKER_THREADS,
                **options,
            )
            _inprocess.start()
            logger.info("learning worker started in process %d", os.getpid())
