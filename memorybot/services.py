"""Writes to the memory bot's records on behalf of chats."""

from django.db import transaction

from memorybot.models import Confession, Enrichment
from memorybot.purge import chat_model_calls_blank


@transaction.atomic
def chat_records_forget(*, chat_id: str) -> None:
    """Delete what the memory bot holds of a chat's history: the confessions and
    enrichments that repeat its words (an enrichment keeps the person's original), and the
    requests and results of the chat's model calls."""
    Confession.objects.filter(chat_id=chat_id).delete()
    # Ids only: the delete collector would otherwise load (and decrypt) the rows.
    Enrichment.objects.filter(chat_id=chat_id).only("id").delete()
    chat_model_calls_blank(chat_id=chat_id)
