"""The memory bot's records in the read-only admin: metadata only.

Requests, results, confessions and enrichments are encrypted and never shown. Learning runs
show their safe error and the cause code of their model call (`bad_model`, `timeout`,
`budget` …), and link to their chat, turn, bot and model calls.
"""

import re
from typing import Any

from django.contrib import admin
from django.db.models import CharField, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Cast, Coalesce, Concat, NullIf
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from chats.models import Chat, Turn
from memorybot.models import (
    Confession,
    Enrichment,
    EnrichmentEntry,
    LearningRun,
    ModelCall,
    ModelCallEntry,
)
from openbot.admin import ReadOnlyAdmin, change_link, id_filter, links, list_url, related_list
from openbot.models import Bot, Organization

# A learning step's calls carry `learning:<run id>:<step>`.
LEARNING_STEP = re.compile(r"learning:([0-9]+):")


def _calls_of_run(run_id: str) -> Q:
    return Q(step_key__startswith=f"learning:{run_id}:")


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "bot_link",
        "organization_link",
        "purpose",
        "model",
        "status",
        "error_kind",
        "run_link",
        "input_tokens",
        "output_tokens",
        "cost_micros",
        "billed",
        "attempt",
        "chat_id",
        "blanked_at",
    )
    list_filter = (
        "purpose",
        "status",
        "error_kind",
        "billed",
        id_filter("bot", "bot_id"),
        id_filter("organization", "organization_id"),
        id_filter("chat", "chat_id"),
        id_filter("run", matching=_calls_of_run),
    )
    search_fields = (
        "id__exact",
        "=bot__id",
        "=organization__id",
        "=chat_id",
        "model",
        "step_key",
    )
    search_help_text = "A call's number, a bot, organization or chat id, a model, or a step key."
    fields = (*list_display[1:], "step_key", "finished_at")

    @admin.display(description="learning run")
    def run_link(self, row: ModelCall) -> str:
        found = LEARNING_STEP.match(row.step_key or "")
        return change_link("memorybot.learningrun", found.group(1)) if found else "-"


@admin.register(ModelCallEntry)
class ModelCallEntryAdmin(ReadOnlyAdmin):
    # The call's id, never the call: loading it would decrypt its request and result.
    list_display = ("id", "call_id", "entry_id")
    search_fields = ("=entry_id", "call_id__exact")
    search_help_text = "An entry id, or a model call's number."
    fields = ("call_id", "entry_id")
    readonly_fields = ("call_id",)


@admin.register(Confession)
class ConfessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_link", "turn_link")
    list_filter = (id_filter("chat", "chat_id"), id_filter("turn", "turn_id"))
    search_fields = ("=chat__id", "turn__id__exact")
    search_help_text = "A chat id, or a turn's number."
    fields = ("created_at", "chat_link", "turn_link")


@admin.register(Enrichment)
class EnrichmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "chat_link", "turn_link", "entries_used")
    list_filter = (id_filter("chat", "chat_id"), id_filter("turn", "turn_id"))
    search_fields = ("=chat__id", "turn__id__exact")
    search_help_text = "A chat id, or a turn's number."
    fields = ("created_at", "chat_link", "turn_link", "entries_used")

    @admin.display(description="entries used")
    def entries_used(self, row: Enrichment) -> SafeString:
        return format_html_join(
            ", ", "{}", ((change_link("memory.entry", entry_id),) for entry_id in row.entry_ids)
        )


@admin.register(EnrichmentEntry)
class EnrichmentEntryAdmin(ReadOnlyAdmin):
    # The enrichment's id, never the enrichment: loading it would decrypt it.
    list_display = ("id", "enrichment_id", "entry_id")
    search_fields = ("=entry_id", "enrichment_id__exact")
    search_help_text = "An entry id, or an enrichment's number."
    fields = ("enrichment_id", "entry_id")
    readonly_fields = ("enrichment_id",)


@admin.register(LearningRun)
class LearningRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "chat_link",
        "turn_link",
        "bot_of_chat",
        "status",
        "error",
        "cause",
        "refused",
        "start_seq",
        "end_seq",
        "claims",
        "finished_at",
    )
    list_filter = (
        "status",
        "error",
        id_filter("bot", "chat__bot_id"),
        id_filter("organization", "chat__organization_id"),
        id_filter("chat", "chat_id"),
        id_filter("turn", "turn_id"),
    )
    search_fields = (
        "id__exact",
        "=chat__id",
        "turn__id__exact",
        "=chat__bot__id",
        "=chat__organization__id",
        "=chat__owner__id",
    )
    search_help_text = "A run's or turn's number, or a chat, bot, organization or owner id."
    fields = (*list_display[1:], "not_before", "leased_until", "sent_at", "related")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The cause code of the run's last failed model call, in the same query.
        key_prefix = Concat(
            Value("learning:"),
            Cast(OuterRef("pk"), CharField()),
            Value(":"),
            output_field=CharField(),
        )
        failed_calls = (
            ModelCall.objects.filter(step_key__startswith=key_prefix)
            .exclude(status=ModelCall.Status.OK)
            .order_by("-attempt", "-pk")
        )
        cause = Coalesce(NullIf("error_kind", Value("")), "status", output_field=CharField())
        return (
            super()
            .get_queryset(request)
            .annotate(
                chat_bot_id=F("chat__bot_id"),
                call_cause=Subquery(failed_calls.annotate(cause=cause).values("cause")[:1]),
            )
        )

    @admin.display(description="bot", ordering="chat__bot_id")
    def bot_of_chat(self, row: Any) -> str:
        return change_link("openbot.bot", row.chat_bot_id)

    @admin.display(description="cause (model call)", ordering="call_cause")
    def cause(self, row: Any) -> str:
        return str(row.call_cause or "-")

    @admin.display(description="refused changes")
    def refused(self, row: LearningRun) -> str:
        return ", ".join(str(refusal.get("reason")) for refusal in row.refusals) or "-"

    @admin.display(description="related")
    def related(self, row: LearningRun) -> SafeString:
        return links(("model calls", list_url("memorybot.modelcall", run=row.pk)))


for owner in (Organization, Bot):
    related_list(owner, "model calls", "memorybot.modelcall", owner.__name__.lower())
    related_list(owner, "learning runs", "memorybot.learningrun", owner.__name__.lower())
related_list(Chat, "learning runs", "memorybot.learningrun", "chat")
related_list(Chat, "model calls", "memorybot.modelcall", "chat")
related_list(Chat, "confessions", "memorybot.confession", "chat")
related_list(Chat, "enrichments", "memorybot.enrichment", "chat")
related_list(Chat, "memory entries from it", "memory.entry", "chat")
related_list(Turn, "learning run", "memorybot.learningrun", "turn")
related_list(Turn, "confessions", "memorybot.confession", "turn")
related_list(Turn, "enrichments", "memorybot.enrichment", "turn")
