"""[Q4] A turn's query count, pinned so a gain cannot silently regress."""

from typing import Any

from django.db import connection

from tests.conftest import World
from tests.memorybot.scenes import chat_open, take_turn

# The pool's lock is one statement on PostgreSQL; SQLite needs none [L1].
TURN = 44 + (3 if connection.vendor == "postgresql" else 0)


def test_a_turn(world: World, django_assert_max_num_queries: Any) -> None:
    chat_id = chat_open(world.alice, world.bot)
    take_turn(world.alice, chat_id, "warm up: the token's last use is written once a minute")
    with django_assert_max_num_queries(TURN):
        take_turn(world.alice, chat_id, "what do you remember about me?")
