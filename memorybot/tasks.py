"""Dramatiq actors. Messages carry run ids only, never content [X2]; actors are idempotent
because Dramatiq delivers at least once."""

import dramatiq
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memorybot.broker import message_key
from memorybot.learning import LEARNING_QUEUE, learning_run_process
from memorybot.models import LearningRun


@dramatiq.actor(
    queue_name=LEARNING_QUEUE,
    max_retries=5,
    min_backoff=1_000,
    time_limit=int((settings.OPENBOT_LEARNING_STEP_SECONDS + 60) * 1000),
)
def learn(run_id: int) -> None:
    learning_run_process(run_id=run_id)


def learning_enqueue(run_ids: list[int]) -> None:
    """Send the runs once the current transaction commits, so no message names an
    uncommitted row. (The in-process worker, where that is the setting, started with the
    serving process: settings/wsgi.py.)

    A broker that cannot take the message fails nothing: the run is stored, and the recovery
    pass sends it later (robust: the error is logged, the turn still answers)."""
    for run_id in run_ids:
        transaction.on_commit(lambda run_id=run_id: learning_send(run_id), robust=True)  # type: ignore[misc]


def learning_send(run_id: int) -> None:
    """Send one run's message now, noting when and under which key, so recovery does not send
    it again while the broker holds it."""
    message = learn.send(run_id)
    LearningRun.objects.filter(id=run_id).update(
        sent_at=timezone.now(), message_key=message_key(message)
    )
