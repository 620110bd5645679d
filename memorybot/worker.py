"""Where learning runs: an in-process worker by default, `rundramatiq` in production,
and the middleware that runs the recovery pass (`memorybot.recovery`) on worker start and
every OPENBOT_RECOVERY_SECONDS.

Dramatiq loads this module's middleware while Django builds its app registry (django_dramatiq
sets up the broker in its AppConfig), before any model can be imported: so this module imports
no models, and the loop imports the recovery pass when it first runs."""

import logging
import os
import threading
from typing import Any

import dramatiq
from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_inprocess: dramatiq.Worker | None = None


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
        # Not at the top: Dramatiq loads this middleware before Django's apps are ready.
        from memorybot.recovery import prune_model_calls_daily, recover_learning

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
    process calls it when it creates the WSGI application: settings/wsgi.py."""
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
