"""Chat routes: create, read, items, turns, and what the memory bot did; the export of
everything about a person."""

from collections.abc import Callable
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.permissions import ChatScopedViewSet, IsChatOwner, IsChatParticipant
from chats.selectors import chat_items
from chats.services import chat_create
from conversations.export import export_response
from conversations.serializers import (
    ChatCreateInput,
    ChatOutput,
    ConfessionsOutput,
    EnrichmentsOutput,
    ItemsOutput,
    LearningRunsOutput,
    TurnInput,
    TurnResult,
)
from conversations.turns import chat_history_forget, turn_again, turn_run
from memorybot.selectors import (
    confessions_of_chat,
    enrichments_of_chat,
    learning_runs_of_chat,
)
from openbot.auth import caller_of
from openbot.idempotency import IDEMPOTENCY_ERRORS, IDEMPOTENCY_KEY, Claim, idempotent
from openbot.paging import CURSOR, LIMIT, Position, paged
from openbot.permissions import CanReadBot
from openbot.schema import errors


class ChatViewSet(ChatScopedViewSet):
    """Chats: create, read, items, turns, and what the memory bot did."""

    lookup_url_kwarg = "chat_id"
    # Creating a chat names its bot in the body: `chat_create` looks it up through the
    # caller, as DRF applies no object permission to creates.
    permissions: dict[str, list[type[BasePermission]]] = {
        "create": [IsAuthenticated],
        "retrieve": [IsAuthenticated, IsChatParticipant],
        "items": [IsAuthenticated, IsChatParticipant],
        "items_delete": [IsAuthenticated, IsChatParticipant, IsChatOwner],
        "turns": [IsAuthenticated, IsChatParticipant, CanReadBot],  # turns need read
        "confessions": [IsAuthenticated, IsChatOwner],
        "enrichments": [IsAuthenticated, IsChatOwner],
        "learning": [IsAuthenticated, IsChatOwner],
    }

    def get_permissions(self) -> list[BasePermission]:
        declared = self.permissions.get(self.action or "", [IsAuthenticated])
        return [permission() for permission in declared]

    @extend_schema(request=ChatCreateInput, responses={201: ChatOutput, **errors(400, 401, 404)})
    def create(self, request: Request) -> Response:
        """Open a chat with a bot you may read, in a channel you are in if given."""
        serializer = ChatCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        chat = chat_create(
            caller=self.caller,
            bot_id=data["bot"],
            channel_id=data.get("channel"),
            test=data["test"],
        )
        return Response(ChatOutput(chat).data, status=201)

    @extend_schema(responses={200: ChatOutput, **errors(401, 404)})
    def retrieve(self, request: Request, chat_id: str) -> Response:
        """A chat you take part in."""
        return Response(ChatOutput(self.chat).data)

    def _page(
        self,
        output: type[serializers.Serializer],
        key: str,
        read: Callable[..., tuple[Any, Position]],
        **kwargs: Any,
    ) -> Response:
        """[A16] A page of one of the chat's lists: `read(after=, limit=, **kwargs)` gives its
        rows and where the page ended; with a `limit`, the body has `nextCursor` too, signed
        for this list, chat and caller."""
        caller = self.caller
        salt = f"chats.{key}.cursor:{self.chat.id}:{caller.organization.id}:{caller.person.id}"

        def listed(after: Any, limit: int | None) -> tuple[dict[str, Any], Position]:
            rows, last = read(after=after, limit=limit, **kwargs)
            return {key: rows}, last

        return Response(output(paged(self.request, salt, listed)).data)

    @extend_schema(
        parameters=[LIMIT, CURSOR], responses={200: ItemsOutput, **errors(400, 401, 404)}
    )
    @action(detail=True, methods=["get"])
    def items(self, request: Request, chat_id: str) -> Response:
        """The chat's items in order; page with `limit` and `cursor`."""
        return self._page(ItemsOutput, "items", chat_items, chat=self.chat)

    @extend_schema(
        responses={204: OpenApiResponse(description="History deleted"), **errors(401, 403, 404)}
    )
    @items.mapping.delete
    def items_delete(self, request: Request, chat_id: str) -> Response:
        """The owner deletes the chat's history; what was learned from it stays."""
        chat_history_forget(chat=self.chat)
        return Response(status=204)

    @extend_schema(
        request=TurnInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: TurnResult, **errors(400, 401, 404), **IDEMPOTENCY_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def turns(self, request: Request, chat_id: str) -> Response:
        """Take a turn: your words, the bot's answer; it always ends. With an
        `Idempotency-Key`, a retry answers the same turn and takes none."""
        serializer = TurnInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        chat, person, text = self.chat, self.caller.person, serializer.validated_data["text"]

        def run(claim: Claim) -> Any:
            return TurnResult(turn_run(chat=chat, person=person, text=text, claim=claim)).data

        def again(turn_id: str) -> Any:
            outcome = turn_again(chat=chat, turn_id=turn_id)
            return None if outcome is None else TurnResult(outcome).data

        return idempotent(request, caller=self.caller, status=201, work=run, replay=again)

    @extend_schema(
        parameters=[LIMIT, CURSOR], responses={200: ConfessionsOutput, **errors(400, 401, 404)}
    )
    @action(detail=True, methods=["get"])
    def confessions(self, request: Request, chat_id: str) -> Response:
        """[A6] What the bot confided and the replies; review before showing to people. Page
        with `limit` and `cursor`."""
        return self._page(
            ConfessionsOutput, "confessions", confessions_of_chat, chat_id=self.chat.id
        )

    @extend_schema(
        parameters=[LIMIT, CURSOR], responses={200: EnrichmentsOutput, **errors(400, 401, 404)}
    )
    @action(detail=True, methods=["get"])
    def enrichments(self, request: Request, chat_id: str) -> Response:
        """Per turn: the new text (withheld when it was made from an entry the
        owner may no longer use), the person's words and the entries used. Page with `limit`
        and `cursor`."""
        return self._page(EnrichmentsOutput, "enrichments", enrichments_of_chat, chat=self.chat)

    @extend_schema(
        parameters=[LIMIT, CURSOR], responses={200: LearningRunsOutput, **errors(400, 401, 404)}
    )
    @action(detail=True, methods=["get"])
    def learning(self, request: Request, chat_id: str) -> Response:
        """[A12] The chat's learning runs, newest first: status, what applied, what was
        refused and why, as codes — never model output or content. Page with `limit` and
        `cursor`."""
        return self._page(LearningRunsOutput, "runs", learning_runs_of_chat, chat_id=self.chat.id)


class MyExportApi(APIView):
    """Everything about the token's person in the token's organization."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description=(
                    'One JSON document, `"format": 1`: `organization`, `person`, `channels`, '
                    "`tokens` (metadata, no secret), `memory` (per bot you may read: `bot`, "
                    "`entries` as GET memory lists them, `version`) and `chats` (your chats "
                    "with `items`, `enrichments` and `learningRuns`). See docs/api.md."
                ),
            ),
            **errors(401),
        }
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        """Download everything about you: streamed, one JSON document."""
        caller = caller_of(request)
        return export_response(person=caller.person, organization=caller.organization)
