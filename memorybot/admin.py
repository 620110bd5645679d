"""[O3] The memory bot's records in the read-only admin: metadata only."""

from django.contrib import admin

from memorybot.models import (
    Confession,
    Enrichment,
    EnrichmentEntry,
    LearningRun,
    ModelCall,
    ModelCallEntry,
)
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
        "chat_id",
        "blanked_at",
    )
    list_filter = ("purpose", "status", "billed")


@admin.register(ModelCallEntry)
class ModelCallEntryAdmin(ReadOnlyAdmin):
    # The call's id, never the call: loading it would decrypt its request and result.
    list_display = ("id", "call_id", "entry_id")
    fields = ("call_id", "entry_id")
    readonly_fields = ("call_id",)


@admin.register(Confession)
class ConfessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_id", "turn_id")


@admin.register(Enrichment)
class EnrichmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_id", "turn_id")


@admin.register(EnrichmentEntry)
class EnrichmentEntryAdmin(ReadOnlyAdmin):
    # The enrichment's id, never the enrichment: loading it would decrypt it.
    list_display = ("id", "enrichment_id", "entry_id")
    fields = ("enrichment_id", "entry_id")
    readonly_fields = ("enrichment_id",)


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
