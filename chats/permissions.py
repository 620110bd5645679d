"""Permission classes of the chat routes; like `openbot.permissions`, they look the chat
up through the caller (another person's chat is a 404) and leave it on the view. They live
here, not in `openbot`, because `openbot` imports nothing of ours."""

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from chats.models import Chat
from chats.selectors import chat_for_owner, chat_for_participant
from openbot.errors import Forbidden
from openbot.permissions import scoped
from openbot.viewsets import ScopedViewSet


class ChatScopedViewSet(ScopedViewSet):
    """A ViewSet of routes about one chat (`chat_id` in the URL)."""

    chat: Chat

    def route_bot_id(self) -> str:
        """The chat's bot: `CanReadBot` after `IsChatParticipant` asks read on it."""
        return self.chat.bot_id


class IsChatParticipant(BasePermission):
    """The chat's owner, or a current member of a group chat's channel; else a 404."""

    def has_permission(self, request: Request, view: Any) -> bool:
        view = scoped(view, ChatScopedViewSet)
        view.chat = chat_for_participant(caller=view.caller, chat_id=str(view.kwargs["chat_id"]))
        return True


class IsChatOwner(BasePermission):
    """The chat's owner: a participant who is not is a 403, anyone else a 404."""

    def has_permission(self, request: Request, view: Any) -> bool:
        view = scoped(view, ChatScopedViewSet)
        caller = view.caller
        participant_chat = getattr(view, "chat", None)
        if participant_chat is None:
            view.chat = chat_for_owner(caller=caller, chat_id=str(view.kwargs["chat_id"]))
        elif participant_chat.owner_id != caller.person.id:
            raise Forbidden("only the chat's owner may do this")
        return True
