"""Dramatiq actors. Messages carry run ids only, never content [X2]; actors are idempotent
because Dramatiq delivers at least once."""

import dramatiq
from django.conf import settings
from django.db import transaction

from memorybot.learning import learning_run_process


@dramatiq.actor(
    queue_name="learning",
    max_retries=5,
    min_backoff=1_000,
    time_limit=int((settings.OPENBOT_LEARNING_STEP_SECONDS + 60) * 1000),
)
def learn(run_id: int) -> None:
    learning_run_process(run_id=run_id)


def learning_enqueue(run_ids: list[int]) -> None:
    """Send the runs once the current transaction commits, so no message names an
    uncommitted row; starts the in-process worker where that is the setting.

    A broker that cannot take the message fails nothing: the run is stored, and the recovery
    pass sends it later [W2] (robust: the error is logged, the turn still answers)."""
    from memorybot.worker import ensure_inprocess_worker

    ensure_inprocess_worker()
    for run_id in run_ids:
        transaction.on_commit(lambda run_id=run_id: learn.send(run_id), robust=True)  # type: ignore[misc]
