"""Reads of the memory bot's records for a chat: its confessions, enrichments and learning
runs [A6, A12]."""

from django.db.models import QuerySet

from memorybot.models import Confession, Enrichment, LearningRun
from openbot.fields import readable


def confessions_of_chat(*, chat_id: str) -> list[Confession]:
    """[A6] What the bot confided in the chat and the replies, in order; [X5] a row no key
    opens is left out (and logged)."""
    return readable(Confession.objects.filter(chat_id=chat_id).order_by("id"))


def enrichments_of_chat(*, chat_id: str) -> list[Enrichment]:
    """[A6] The chat's rewritten inputs with the persons' words and the entries used, in
    order; [X5] a row no key opens is left out (and logged)."""
    return readable(Enrichment.objects.filter(chat_id=chat_id).order_by("id"))


def learning_runs_of_chat(*, chat_id: str) -> QuerySet[LearningRun]:
    """[A12] The chat's learning runs, newest first; no content is stored on a run."""
    return LearningRun.objects.filter(chat_id=chat_id).order_by("-created_at", "-id")


def learning_run_of_turn(*, turn_id: int) -> int | None:
    """[A12] The id of the learning run a turn's confession stored, if any."""
    return LearningRun.objects.filter(turn_id=turn_id).values_list("id", flat=True).first()


def learning_runs_waiting(*, turn_id: int) -> list[int]:
    """[W2] The ids of the turn's learning runs still waiting for the turn to end."""
    return list(
        LearningRun.objects.filter(turn_id=turn_id, status=LearningRun.Status.WAITING).values_list(
            "id", flat=True
        )
    )
