"""[C4, C5, A6, A12] Chat routes: create, read, items, turns, and what the memory bot did."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from chats.models import Chat, Item, Turn
from chats.permissions import ChatScopedViewSet, IsChatOwner, IsChatParticipant
from chats.selectors import chat_items
from chats.services import MAX_TEXT, chat_create
from chats.turns import chat_history_forget, turn_run
from memorybot.models import Confession, Enrichment, LearningRun
from memorybot.selectors import (
    confessions_of_chat,
    enrichments_of_chat,
    learning_run_of_turn,
    learning_runs_of_chat,
)
from openbot.clock import to_ms
from openbot.permissions import CanReadBot
from openbot.schema import errors
from openbot.serializers import StrictBooleanField, StrictCharField, StrictSerializer


class ChatOutput(serializers.Serializer):
    id = serializers.CharField()
    bot = serializers.CharField(source="bot_id")
    organization = serializers.CharField(source="organization_id")
    owner = serializers.CharField(source="owner_id")
    channel = serializers.CharField(source="channel_id", allow_null=True)
    test = serializers.BooleanField()
    createdAt = serializers.SerializerMethodField()

    def get_createdAt(self, chat: Chat) -> int:
        return to_ms(chat.created_at)


class ItemOutput(serializers.Serializer):
    id = serializers.CharField(source="public_id")
    kind = serializers.CharField()
    text = serializers.CharField()
    app = serializers.CharField(allow_null=True)
    tool = serializers.CharField(allow_null=True)
    createdAt = serializers.SerializerMethodField()

    def get_createdAt(self, item: Item) -> int:
        return to_ms(item.created_at)


class TurnOutput(serializers.Serializer):
    id = serializers.CharField(source="pk")
    chat = serializers.CharField(source="chat_id")
    person = serializers.CharField(source="person_id", allow_null=True)
    startedAt = serializers.SerializerMethodField()
    endedAt = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    learningRun = serializers.SerializerMethodField()

    def get_startedAt(self, turn: Turn) -> int:
        return to_ms(turn.started_at)

    def get_endedAt(self, turn: Turn) -> int | None:
        return to_ms(turn.ended_at) if turn.ended_at else None

    def get_error(self, turn: Turn) -> str | None:
        """[C6] What went wrong in the turn (a code such as `timeout`), or null."""
        return turn.error or None

    def get_learningRun(self, turn: Turn) -> str | None:
        """[A12] The learning run the turn's confession stored (see `/learning`), or null."""
        run_id = learning_run_of_turn(turn_id=turn.pk)
        return None if run_id is None else str(run_id)


class ConfessionOutput(serializers.Serializer):
    id = serializers.CharField(source="pk")
    turn = serializers.CharField(source="turn_id")
    text = serializers.CharField()
    reply = serializers.CharField()
    createdAt = serializers.SerializerMethodField()

    def get_createdAt(self, confession: Confession) -> int:
        return to_ms(confession.created_at)


class EnrichmentOutput(serializers.Serializer):
    turn = serializers.CharField(source="turn_id")
    text = serializers.CharField()
    original = serializers.CharField(allow_null=True)
    entries = serializers.ListField(source="entry_ids", child=serializers.CharField())
    createdAt = serializers.SerializerMethodField()

    def get_createdAt(self, enrichment: Enrichment) -> int:
        return to_ms(enrichment.created_at)


class RefusalOutput(serializers.Serializer):
    """A refused change: its index in the model's answer and the reason code."""

    change = serializers.IntegerField()
    reason = serializers.CharField()


class RunOutput(serializers.Serializer):
    id = serializers.CharField(source="pk")
    turn = serializers.CharField(source="turn_id")
    status = serializers.ChoiceField(choices=LearningRun.Status.choices)
    createdAt = serializers.SerializerMethodField()
    endedAt = serializers.SerializerMethodField()
    applied = serializers.IntegerField()
    refused = RefusalOutput(source="refusals", many=True)
    error = serializers.SerializerMethodField()

    def get_createdAt(self, run: LearningRun) -> int:
        return to_ms(run.created_at)

    def get_endedAt(self, run: LearningRun) -> int | None:
        return to_ms(run.finished_at) if run.finished_at else None

    def get_error(self, run: LearningRun) -> str | None:
        return run.error or None


class ChatCreateInput(StrictSerializer):
    bot = StrictCharField(max_length=40, trim_whitespace=False)
    channel = StrictCharField(max_length=40, required=False, allow_null=True, trim_whitespace=False)
    test = StrictBooleanField(required=False, default=False)


class TurnInput(StrictSerializer):
    text = StrictCharField(max_length=MAX_TEXT, trim_whitespace=False)


class ItemsOutput(serializers.Serializer):
    items = ItemOutput(many=True)


class TurnResult(serializers.Serializer):
    turn = TurnOutput()
    items = ItemOutput(many=True)


class ConfessionsOutput(serializers.Serializer):
    confessions = ConfessionOutput(many=True)


class EnrichmentsOutput(serializers.Serializer):
    enrichments = EnrichmentOutput(many=True)


class LearningRunsOutput(serializers.Serializer):
    runs = RunOutput(many=True)


class ChatViewSet(ChatScopedViewSet):
    """[C4, C5, A6, A12] Chats: create, read, items, turns, and what the memory bot did."""

    lookup_url_kwarg = "chat_id"
    # [A9] Creating a chat names its bot in the body: `chat_create` looks it up through the
    # caller, as DRF applies no object permission to creates.
    permissions: dict[str, list[type[BasePermission]]] = {
        "create": [IsAuthenticated],
        "retrieve": [IsAuthenticated, IsChatParticipant],
        "items": [IsAuthenticated, IsChatParticipant],
        "items_delete": [IsAuthenticated, IsChatParticipant, IsChatOwner],
        "turns": [IsAuthenticated, IsChatParticipant, CanReadBot],  # [C4] turns need read
        "confessions": [IsAuthenticated, IsChatOwner],
        "enrichments": [IsAuthenticated, IsChatOwner],
        "learning": [IsAuthenticated, IsChatOwner],
    }

    def get_permissions(self) -> list[BasePermission]:
        declared = self.permissions.get(self.action or "", [IsAuthenticated])
        return [permission() for permission in declared]

    @extend_schema(request=ChatCreateInput, responses={201: ChatOutput, **errors(400, 401, 404)})
    def create(self, request: Request) -> Response:
        """[C1, C4] Open a chat with a bot you may read, in a channel you are in if given."""
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
        """[C4] A chat you take part in."""
        return Response(ChatOutput(self.chat).data)

    @extend_schema(responses={200: ItemsOutput, **errors(401, 404)})
    @action(detail=True, methods=["get"])
    def items(self, request: Request, chat_id: str) -> Response:
        """[C4] The chat's items in order."""
        return Response(ItemsOutput({"items": chat_items(chat=self.chat)}).data)

    @extend_schema(
        responses={204: OpenApiResponse(description="History deleted"), **errors(401, 403, 404)}
    )
    @items.mapping.delete
    def items_delete(self, request: Request, chat_id: str) -> Response:
        """[C4, P3] The owner deletes the chat's history; what was learned from it stays."""
        chat_history_forget(chat=self.chat)
        return Response(status=204)

    @extend_schema(request=TurnInput, responses={201: TurnResult, **errors(400, 401, 404)})
    @action(detail=True, methods=["post"])
    def turns(self, request: Request, chat_id: str) -> Response:
        """[C3, C4, C6] Take a turn: your words, the bot's answer; it always ends."""
        serializer = TurnInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        outcome = turn_run(
            chat=self.chat, person=self.caller.person, text=serializer.validated_data["text"]
        )
        return Response(TurnResult(outcome).data, status=201)

    @extend_schema(responses={200: ConfessionsOutput, **errors(401, 404)})
    @action(detail=True, methods=["get"])
    def confessions(self, request: Request, chat_id: str) -> Response:
        """[A6, C5] What the bot confided and the replies; review before showing to people."""
        confessions = confessions_of_chat(chat_id=self.chat.id)
        return Response(ConfessionsOutput({"confessions": confessions}).data)

    @extend_schema(responses={200: EnrichmentsOutput, **errors(401, 404)})
    @action(detail=True, methods=["get"])
    def enrichments(self, request: Request, chat_id: str) -> Response:
        """[A6, C5] Per turn: the new text, the person's words and the entries used."""
        enrichments = enrichments_of_chat(chat_id=self.chat.id)
        return Response(EnrichmentsOutput({"enrichments": enrichments}).data)

    @extend_schema(responses={200: LearningRunsOutput, **errors(401, 404)})
    @action(detail=True, methods=["get"])
    def learning(self, request: Request, chat_id: str) -> Response:
        """[A12, C5] The chat's learning runs, newest first: status, what applied, what was
        refused and why, as codes — never model output or content."""
        runs = learning_runs_of_chat(chat_id=self.chat.id)
        return Response(LearningRunsOutput({"runs": runs}).data)
