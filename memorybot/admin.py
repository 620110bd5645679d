"""[O3] The memory bot's records in the read-only admin: metadata only."""

from django.contrib import admin

from memorybot.models import ModelCall
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
