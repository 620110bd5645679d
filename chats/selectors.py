"""Reads for chats, each looked up through the caller: another person's chat is a 404."""

from typing import Any

from django.db.models import Q

from chats.models import Chat, Item
from openbot.access import Caller
from openbot.errors import NotFound
from openbot.fields import readable
from openbot.paging import Position, keyset_page


def chat_for_participant(*, caller: Caller, chat_id: str) -> Chat:
    """[C4] The owner, or a current channel member for a group chat."""
    chat = (
        Chat.objects.select_related("bot", "organization", "channel")
        .filter(id=chat_id, organization=caller.organization)
        .filter(
            Q(owner=caller.person)
            | Q(channel__isnull=False, channel__channelmember__person=caller.person)
        )
        .first()
    )
    if chat is None:
        raise NotFound(f"chat {chat_id} not found")
    return chat


def chat_for_owner(*, caller: Caller, chat_id: str) -> Chat:
    """[C5] Read on the chat is held by its owner only; anyone else gets a 404."""
    chat = (
        Chat.objects.select_related("bot", "organization", "channel")
        .filter(id=chat_id, organization=caller.organization, owner=caller.person)
        .first()
    )
    if chat is None:
        raise NotFound(f"chat {chat_id} not found")
    return chat


def chat_items(
    *, chat: Chat, after: Any = None, limit: int | None = None
) -> tuple[list[Item], Position]:
    """The chat's items in order, a page of them (`openbot.paging`); an item no key opens is
    left out (and logged)."""
    page, last = keyset_page(
        Item.objects.filter(chat=chat), order=("seq",), after=after, limit=limit
    )
    return readable(page), last
