"""Reads of the memory bot's records for a chat: its learning runs [A12]."""

from django.db.models import QuerySet

from memorybot.models import LearningRun


def learning_runs_of_chat(*, chat_id: str) -> QuerySet[LearningRun]:
    """[A12] The chat's learning runs, newest first; no content is stored on a run."""
    return LearningRun.objects.filter(chat_id=chat_id).order_by("-created_at", "-id")


def learning_run_of_turn(*, turn_id: int) -> int | None:
    """[A12] The id of the learning run a turn's confession stored, if any."""
    return LearningRun.objects.filter(turn_id=turn_id).values_list("id", flat=True).first()
