"""[D3] Erasure on request: everything a person left in an organization, removed from every
copy, with a receipt of what went.

In every pool the organization's chats wrote to that holds something of theirs, a purge of
`from:<person>` with every copy the memory bot's records hold (each pool's purge is its
own all-or-nothing change), and the model calls of every chat they spoke in blanked; then,
in one transaction, the history of the person's own chats, their words in other people's
chats replaced by `MARKER` (the item stays, so the chat's order holds) with the enrichments
that repeat them, and their memberships with the grants and tokens they held
(`membership_remove`). A crash part-way leaves each pool either
untouched or done, and running the erasure again finishes the rest. Model calls keep their
usage and cost rows (blanked, for billing and audit); confessions in other people's chats are
the bot's words and stay.
"""

from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from chats.models import Chat, Item, Turn
from conversations.turns import chat_history_forget
from memory.models import Change, EntryTag, Evidence
from memorybot.models import Enrichment, ModelCall, ModelCallEntry
from memorybot.purge import memory_purge, model_calls_blank
from openbot.models import ChannelMember, Grant, Membership, Organization, Person, Token
from openbot.services import membership_remove

MARKER = "[erased at the person's request]"


def person_erase(
    *, person: Person, organization: Organization, dry_run: bool = False
) -> dict[str, int]:
    """Erase `person` from `organization` (or, with `dry_run`, only count what would go): the
    receipt, counts per store."""
    tag = f"from:{person.id}"
    pools = _pools(organization)
    own_chats = Chat.objects.filter(owner=person, organization=organization)
    theirs = _words_elsewhere(person, organization)
    tagged = EntryTag.objects.filter(bot_id__in=pools, tag=tag).values("entry_id")
    receipt = {
        "entries": tagged.count(),
        "evidenceRows": Evidence.objects.filter(entry_id__in=tagged).count(),
        "logPayloads": Change.objects.filter(entry_rows__entry_id__in=tagged).distinct().count(),
        "modelCallsBlanked": _calls(person, organization, tagged).count(),
        "chatsEmptied": own_chats.count(),
        "itemsDeleted": Item.objects.filter(chat__in=own_chats).count(),
        # Text is encrypted, so a rerun cannot tell a marked item: it counts (and marks) again.
        "itemsMarked": theirs.count(),
        "enrichmentsDeleted": _enrichments(person, organization, tagged).count(),
        "tokensRevoked": Token.objects.filter(person=person, organization=organization).count(),
        "grantsRevoked": Grant.objects.filter(
            person=person, bot__organization=organization
        ).count(),
        "membershipsEnded": Membership.objects.filter(
            person=person, organization=organization
        ).count()
        + ChannelMember.objects.filter(person=person, channel__organization=organization).count(),
    }
    if dry_run:
        return receipt
    for pool_id in pools:
        if EntryTag.objects.filter(bot_id=pool_id, tag=tag).exists():
            memory_purge(pool_id=pool_id, tag=tag)
    # The calls of chats they spoke in carry their words, in a pool with nothing of theirs too.
    model_calls_blank(_calls(person, organization, tagged))
    with transaction.atomic():
        for chat in own_chats:
            chat_history_forget(chat=chat)
        theirs.update(text=MARKER)
        # Ids only: the delete collector would otherwise load (and decrypt) the rows.
        Enrichment.objects.filter(turn__in=_turns_elsewhere(person, organization)).only(
            "id"
        ).delete()
        if Membership.objects.filter(person=person, organization=organization).exists():
            membership_remove(organization=organization, person=person)
    return receipt


def _pools(organization: Organization) -> list[str]:
    """The pools the organization's chats wrote to: its bots', and those of bots shared into
    it (a linked bot writes to its source bot's pool)."""
    bots = Chat.objects.filter(organization=organization).values_list("bot_id", "bot__source_id")
    return sorted({source_id or bot_id for bot_id, source_id in bots.distinct()})


def _turns_elsewhere(person: Person, organization: Organization) -> QuerySet[Turn]:
    """The person's turns in chats of the organization they do not own."""
    return Turn.objects.filter(person=person, chat__organization=organization).exclude(
        chat__owner=person
    )


def _words_elsewhere(person: Person, organization: Organization) -> QuerySet[Item]:
    """The person's words in chats of the organization they do not own."""
    return Item.objects.filter(
        kind=Item.Kind.PERSON, turn__in=_turns_elsewhere(person, organization)
    )


def _calls(
    person: Person, organization: Organization, tagged: QuerySet[EntryTag, Any]
) -> QuerySet[ModelCall]:
    """The calls the erasure blanks: those that carried a `tagged` entry, and those of every
    chat of the organization the person took a turn in or owns."""
    carried = ModelCallEntry.objects.filter(entry_id__in=tagged).values("call_id")
    chats = Q(chat_id__in=Turn.objects.filter(person=person).values("chat_id")) | Q(
        chat_id__in=Chat.objects.filter(owner=person).values("id")
    )
    return ModelCall.objects.filter(blanked_at__isnull=True).filter(
        Q(id__in=carried) | (chats & Q(organization=organization))
    )


def _enrichments(
    person: Person, organization: Organization, tagged: QuerySet[EntryTag, Any]
) -> QuerySet[Enrichment]:
    """The enrichments the erasure deletes: made from a `tagged` entry, of the person's own
    chats, or of their turns in other people's chats."""
    return Enrichment.objects.filter(
        Q(entry_rows__entry_id__in=tagged)
        | Q(chat__owner=person, chat__organization=organization)
        | Q(turn__in=_turns_elsewhere(person, organization))
    ).distinct()
