"""Dramatiq actors of memory. Messages carry pool ids only, never content."""

import dramatiq
from django.db import transaction

from memory.vectors import vectors_fill

MEANING_QUEUE = "meaning"


@dramatiq.actor(queue_name=MEANING_QUEUE, max_retries=3, min_backoff=1_000)
def embed(pool_id: str) -> None:
    """Write the pool's missing vectors (idempotent: Dramatiq delivers at least once)."""
    vectors_fill(pool_id)


def vectors_request(pool_id: str) -> None:
    """Ask the worker for the pool's missing vectors once the current transaction commits.
    A broker that cannot take the message fails nothing (robust): the pool's next write or
    `manage.py reindex` asks again."""
    transaction.on_commit(lambda: embed.send(pool_id), robust=True)
