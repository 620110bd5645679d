"""[C4] Chat routes: create, read, list and delete items."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.models import Chat, Item, Turn
from chats.selectors import chat_for_owner, chat_for_participant, chat_items
from chats.services import MAX_TEXT, chat_create
from chats.turns import chat_history_forget, turn_run
from memorybot.models import Confession, Enrichment, LearningRun
from memorybot.selectors import learning_run_of_turn, learning_runs_of_chat
from openbot.access import bot_for_reader
from openbot.auth import caller_of
from openbot.clock import to_ms
from openbot.errors import Forbidden
from openbot.fields import readable
from openbot.schema import ERRORS
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


def item_body(item: Item) -> dict[str, Any]:
    return dict(ItemOutput(item).data)


class ChatCreateApi(APIView):
    class InputSerializer(StrictSerializer):
        bot = StrictCharField(max_length=40)
        channel = StrictCharField(max_length=40, required=False, allow_null=True)
        test = StrictBooleanField(required=False, default=False)

    @extend_schema(request=InputSerializer, responses={201: ChatOutput, **ERRORS})
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        chat = chat_create(
            caller=caller_of(request),
            bot_id=data["bot"],
            channel_id=data.get("channel"),
            test=data["test"],
        )
        return Response(ChatOutput(chat).data, status=201)


class ChatDetailApi(APIView):
    @extend_schema(responses={200: ChatOutput, **ERRORS})
    def get(self, request: Request, chat_id: str) -> Response:
        chat = chat_for_participant(caller=caller_of(request), chat_id=chat_id)
        return Response(ChatOutput(chat).data)


class ChatItemsApi(APIView):
    class ItemsOutput(serializers.Serializer):
        items = ItemOutput(many=True)

    @extend_schema(responses={200: ItemsOutput, **ERRORS})
    def get(self, request: Request, chat_id: str) -> Response:
        chat = chat_for_participant(caller=caller_of(request), chat_id=chat_id)
        return Response({"items": [item_body(item) for item in chat_items(chat=chat)]})

    @extend_schema(responses={204: OpenApiResponse(description="History deleted"), **ERRORS})
    def delete(self, request: Request, chat_id: str) -> Response:
        caller = caller_of(request)
        chat = chat_for_participant(caller=caller, chat_id=chat_id)
        if chat.owner_id != caller.person.id:
            raise Forbidden("only the chat's owner may delete its history")
        chat_history_forget(chat=chat)
        return Response(status=204)


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


class ChatTurnApi(APIView):
    class InputSerializer(StrictSerializer):
        text = StrictCharField(max_length=MAX_TEXT, trim_whitespace=False)

    class TurnResult(serializers.Serializer):
        turn = TurnOutput()
        items = ItemOutput(many=True)

    @extend_schema(request=InputSerializer, responses={201: TurnResult, **ERRORS})
    def post(self, request: Request, chat_id: str) -> Response:
        caller = caller_of(request)
        chat = chat_for_participant(caller=caller, chat_id=chat_id)
        bot_for_reader(caller=caller, bot_id=chat.bot_id)  # [C4] taking turns needs read
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        outcome = turn_run(chat=chat, person=caller.person, text=serializer.validated_data["text"])
        return Response(
            {
                "turn": TurnOutput(outcome.turn).data,
                "items": [item_body(item) for item in outcome.items],
            },
            status=201,
        )


class ChatConfessionsApi(APIView):
    class ConfessionOutput(serializers.Serializer):
        id = serializers.CharField(source="pk")
        turn = serializers.CharField(source="turn_id")
        text = serializers.CharField()
        reply = serializers.CharField()
        createdAt = serializers.SerializerMethodField()

        def get_createdAt(self, confession: Confession) -> int:
            return to_ms(confession.created_at)

    class ConfessionsOutput(serializers.Serializer):
        confessions = serializers.ListField()

    @extend_schema(responses={200: ConfessionsOutput, **ERRORS})
    def get(self, request: Request, chat_id: str) -> Response:
        """[A6, C5] What the bot confided and the replies; review before showing to people."""
        chat = chat_for_owner(caller=caller_of(request), chat_id=chat_id)
        confessions = readable(Confession.objects.filter(chat=chat).order_by("id"))
        return Response({"confessions": [self.ConfessionOutput(item).data for item in confessions]})


class ChatEnrichmentsApi(APIView):
    class EnrichmentOutput(serializers.Serializer):
        turn = serializers.CharField(source="turn_id")
        text = serializers.CharField()
        original = serializers.CharField(allow_null=True)
        entries = serializers.ListField(source="entry_ids", child=serializers.CharField())
        createdAt = serializers.SerializerMethodField()

        def get_createdAt(self, enrichment: Enrichment) -> int:
            return to_ms(enrichment.created_at)

    class EnrichmentsOutput(serializers.Serializer):
        enrichments = serializers.ListField()

    @extend_schema(responses={200: EnrichmentsOutput, **ERRORS})
    def get(self, request: Request, chat_id: str) -> Response:
        """[A6, C5] Per turn: the new text, the person's words and the entries used."""
        chat = chat_for_owner(caller=caller_of(request), chat_id=chat_id)
        enrichments = readable(Enrichment.objects.filter(chat=chat).order_by("id"))
        return Response({"enrichments": [self.EnrichmentOutput(item).data for item in enrichments]})


class ChatLearningApi(APIView):
    class RunOutput(serializers.Serializer):
        id = serializers.CharField(source="pk")
        turn = serializers.CharField(source="turn_id")
        status = serializers.ChoiceField(choices=LearningRun.Status.choices)
        createdAt = serializers.SerializerMethodField()
        endedAt = serializers.SerializerMethodField()
        applied = serializers.IntegerField()
        refused = serializers.SerializerMethodField()
        error = serializers.SerializerMethodField()

        def get_createdAt(self, run: LearningRun) -> int:
            return to_ms(run.created_at)

        def get_endedAt(self, run: LearningRun) -> int | None:
            return to_ms(run.finished_at) if run.finished_at else None

        def get_refused(self, run: LearningRun) -> list[dict[str, Any]]:
            """Per refused change: its index in the model's answer and the reason code."""
            return [
                {"change": refusal["change"], "reason": refusal["reason"]}
                for refusal in run.refusals
            ]

        def get_error(self, run: LearningRun) -> str | None:
            return run.error or None

    class RunsOutput(serializers.Serializer):
        runs = serializers.ListField()

    @extend_schema(responses={200: RunsOutput, **ERRORS})
    def get(self, request: Request, chat_id: str) -> Response:
        """[A12, C5] The chat's learning runs, newest first: status, what applied, what was
        refused and why, as codes — never model output or content."""
        chat = chat_for_owner(caller=caller_of(request), chat_id=chat_id)
        runs = learning_runs_of_chat(chat_id=chat.id)
        return Response({"runs": [self.RunOutput(run).data for run in runs]})
