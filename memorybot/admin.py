"""[O3] The memory bot's records in the read-only admin: metadata only."""

from django.contrib import admin

from memorybot.models import Confession, Enrichment, LearningRun, ModelCall
from openbot.admin import ReadOnlyAdmin


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "bot",
        "organization",
        "purpose",
        "model",
        "status",
        "error_kind",
        "input_tokens",
        "output_tokens",
        "cost_micros",
        "billed",
        "attempt",
    )
    list_filter = ("purpose", "status", "billed")


@admin.register(Confession)
class ConfessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_id", "turn_id")


@admin.register(Enrichment)
class EnrichmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_id", "turn_id")


@admin.register(LearningRun)
class LearningRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "chat_id",
        "turn_id",
        "status",
        "start_seq",
        "end_seq",
        "claims",
        "error",
        "finished_at",
    )
    list_filter = ("status",)
