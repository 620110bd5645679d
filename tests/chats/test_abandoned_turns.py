"""[C6] A turn whose serving process stopped mid-turn (killed, a lost machine) is ended by the
recovery pass once it is well past the turn's deadline, so its learning run goes on [W2]."""

import json
from datetime import timedelta
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from chats.models import Event, Turn
from chats.services import turn_end, turn_start
from memorybot.learning import learning_run_create
from memorybot.models import LearningRun
from memorybot.recovery import ABANDONED_AFTER_DEADLINE_SECONDS
from tests.conftest import World
from tests.factories import ChatFactory


def started(world: World, seconds_ago: float) -> Turn:
    """A turn whose process stopped right after storing the person's item."""
    turn = turn_start(
        chat=ChatFactory.create(owner=world.alice, bot=world.bot),
        person=world.alice.person,
        text="Hi",
    )
    Turn.objects.filter(pk=turn.pk).update(
        started_at=timezone.now() - timedelta(seconds=seconds_ago)
    )
    return turn


def recover() -> Any:
    out = StringIO()
    call_command("recover_learning", stdout=out)
    return json.loads(out.getvalue())


def test_recovery_ends_a_turn_its_process_left_open(world: World, settings: Any) -> None:
    settings.OPENBOT_TURN_DEADLINE_SECONDS = 5
    turn = started(world, seconds_ago=5 + ABANDONED_AFTER_DEADLINE_SECONDS + 1)
    run = learning_run_create(turn=turn)  # a confide had stored one
    assert recover() == {"enqueued": 1}
    turn.refresh_from_db()
    assert turn.ended_at is not None and turn.error == Turn.Error.ABANDONED
    assert Event.objects.filter(kind=Event.Kind.TURN_ENDED, turn=turn).exists()
    assert LearningRun.objects.get(pk=run.pk).sent_at is not None


def test_recovery_leaves_a_turn_that_may_still_be_running(world: World, settings: Any) -> None:
    settings.OPENBOT_TURN_DEADLINE_SECONDS = 5
    turn = started(world, seconds_ago=5 + ABANDONED_AFTER_DEADLINE_SECONDS - 10)
    recover()
    turn.refresh_from_db()
    assert turn.ended_at is None
    turn_end(turn=turn)  # its own process ends it
