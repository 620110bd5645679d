"""Reads of the memory bot's records for a chat: its confessions, enrichments and learning
runs."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from chats.models import Chat
from memory.access import Reader, visible_among
from memory.lock import pool_read
from memorybot.models import Confession, Enrichment, EnrichmentEntry, LearningRun
from openbot.fields import readable
from openbot.paging import Position, keyset_page


def confessions_of_chat(
    *, chat_id: str, after: Any = None, limit: int | None = None
) -> tuple[list[Confession], Position]:
    """What the bot confided in the chat and the replies, in order, a page of them
    (`openbot.paging`); a row no key opens is left out (and logged)."""
    page, last = keyset_page(
        Confession.objects.filter(chat_id=chat_id), order=("id",), after=after, limit=limit
    )
    return readable(page), last


@dataclass(frozen=True)
class EnrichmentShown:
    """A stored rewrite as the chat's owner may see it now: `entry_ids` the entries it named
    that they may still use, `text` None (`withheld`) when it was made from one they may not."""

    turn_id: int
    text: str | None
    original: str | None
    entry_ids: list[str]
    withheld: bool
    created_at: datetime


def enrichments_of_chat(
    *, chat: Chat, after: Any = None, limit: int | None = None
) -> tuple[list[EnrichmentShown], Position]:
    """[N6] The chat's rewritten inputs with the persons' words and the entries used, in
    order, checked against what the chat's owner may use now: a rewrite made from an entry
    they left the channel of, Forgot, or that was invalidated no longer shows its text. Every
    entry the memory bot was shown counts, not only those it named: nothing proves which of
    them shaped the text. A page of them (`openbot.paging`); a row no key opens is left out
    (and logged)."""
    page, last = keyset_page(
        Enrichment.objects.filter(chat_id=chat.id), order=("id",), after=after, limit=limit
    )
    enrichments = readable(page)
    shown: defaultdict[int, set[str]] = defaultdict(set)
    for enrichment_id, entry_id in EnrichmentEntry.objects.filter(
        enrichment__in=[enrichment.pk for enrichment in enrichments]
    ).values_list("enrichment_id", "entry_id"):
        shown[enrichment_id].add(entry_id)
    for enrichment in enrichments:
        shown[enrichment.pk].update(enrichment.entry_ids)
    used = set().union(*shown.values())
    pool_id = chat.bot.pool_bot_id
    owner = Reader(organization_id=chat.organization_id, person_id=chat.owner_id, bot=chat.bot)
    with pool_read(pool_id):
        reader = owner.as_of_now()
        usable = set(
            visible_among(pool_id=pool_id, reader=reader, ids=list(used)).values_list(
                "id", flat=True
            )
        )
    listed = []
    for enrichment in enrichments:
        withheld = not shown[enrichment.pk] <= usable
        listed.append(
            EnrichmentShown(
                turn_id=enrichment.turn_id,
                text=None if withheld else enrichment.text,
                original=enrichment.original,
                entry_ids=[entry_id for entry_id in enrichment.entry_ids if entry_id in usable],
                withheld=withheld,
                created_at=enrichment.created_at,
            )
        )
    return listed, last


def learning_runs_of_chat(
    *, chat_id: str, after: Any = None, limit: int | None = None
) -> tuple[QuerySet[LearningRun], Position]:
    """The chat's learning runs, newest first, a page of them (`openbot.paging`); no content
    is stored on a run."""
    return keyset_page(
        LearningRun.objects.filter(chat_id=chat_id),
        order=("-created_at", "-id"),
        after=after,
        limit=limit,
    )


def learning_run_of_turn(*, turn_id: int) -> int | None:
    """The id of the learning run a turn's confession stored, if any."""
    return LearningRun.objects.filter(turn_id=turn_id).values_list("id", flat=True).first()


def learning_runs_waiting(*, turn_id: int) -> list[int]:
    """The ids of the turn's learning runs still waiting for the turn to end."""
    return list(
        LearningRun.objects.filter(turn_id=turn_id, status=LearningRun.Status.WAITING).values_list(
            "id", flat=True
        )
    )
