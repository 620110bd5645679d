"""What the chat routes answer and accept: one serializer per body, so
the schema shows exactly what a client sends and receives."""

from rest_framework import serializers

from chats.models import Chat, Item, Turn
from chats.services import MAX_TEXT
from memory.learned import REFUSAL_CODES
from memorybot.models import Confession, LearningRun
from memorybot.selectors import EnrichmentShown, learning_run_of_turn
from openbot.clock import to_ms
from openbot.paging import PageOutput
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
        """What went wrong in the turn (a code such as `timeout`), or null."""
        return turn.error or None

    def get_learningRun(self, turn: Turn) -> str | None:
        """The learning run the turn's confession stored (see `/learning`), or null."""
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
    """`text` is null and `withheld` true when the rewrite was made from an entry the
    owner may no longer use; `entries` lists those they may still use."""

    turn = serializers.CharField(source="turn_id")
    text = serializers.CharField(allow_null=True)
    withheld = serializers.BooleanField()
    original = serializers.CharField(allow_null=True)
    entries = serializers.ListField(source="entry_ids", child=serializers.CharField())
    createdAt = serializers.SerializerMethodField()

    def get_createdAt(self, enrichment: EnrichmentShown) -> int:
        return to_ms(enrichment.created_at)


class RefusalOutput(serializers.Serializer):
    """A refused change: its index in the model's answer and the reason code."""

    change = serializers.IntegerField()
    reason = serializers.ChoiceField(choices=REFUSAL_CODES)


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


class ItemsOutput(PageOutput):
    items = ItemOutput(many=True)


class TurnResult(serializers.Serializer):
    turn = TurnOutput()
    items = ItemOutput(many=True)


class ConfessionsOutput(PageOutput):
    confessions = ConfessionOutput(many=True)


class EnrichmentsOutput(PageOutput):
    enrichments = EnrichmentOutput(many=True)


class LearningRunsOutput(PageOutput):
    runs = RunOutput(many=True)
