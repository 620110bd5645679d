"""[X4] Memory in the read-only admin: metadata only, never decrypted content.

`Entry.content` and `Change.payload` are encrypted: they are left out of every list and page
(and `ReadOnlyAdmin` defers them in every query). Rows that point at an entry or a change show
its id as a link, not the related object, so that no page loads — and decrypts — a related row.
An entry's page lists its tags, sources, evidence rules and exclusions, and explains for a
person or a channel which clause of the access rule hides it (`memory.explain`).
"""

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString

from memory.explain import CLAUSES, Explanation, explain_access, reader_for
from memory.models import (
    Change,
    ChangeEntry,
    Closure,
    Entry,
    EntrySource,
    EntryTag,
    Evidence,
    Exclusion,
    Pool,
)
from openbot.admin import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    id_filter,
    linked,
    links,
    list_url,
    ms_column,
    related_list,
)
from openbot.errors import ApplicationError
from openbot.models import Bot, Organization, Person


def _tagged(*tags: str) -> Q:
    return Q(pk__in=EntryTag.objects.filter(tag__in=tags).values("entry_id"))


def _with_evidence(**lookup: str) -> Q:
    return Q(pk__in=Evidence.objects.filter(**lookup).values("entry_id"))


# The ids an entry is linked to, read from its metadata: which entries a bot, an
# organization, a person, a chat or a channel has to do with.
ENTRIES_OF: dict[str, Callable[[str], Q]] = {
    # A linked bot reads its source bot's pool.
    "bot": lambda bot_id: (
        Q(bot_id=bot_id)
        | Q(bot_id__in=Bot.objects.filter(id=bot_id, source__isnull=False).values("source_id"))
    ),
    "organization": lambda org_id: (
        _tagged(f"org:{org_id}") | _with_evidence(organization_id=org_id)
    ),
    "person": lambda person_id: (
        _tagged(f"from:{person_id}", f"for:person:{person_id}")
        | _with_evidence(rule=f"person:{person_id}")
        | Q(pk__in=Exclusion.objects.filter(person_id=person_id).values("entry_id"))
    ),
    "chat": lambda chat_id: (
        _tagged(f"chat:{chat_id}")
        | Q(pk__in=EntrySource.objects.filter(chat_id=chat_id).values("entry_id"))
        | _with_evidence(chat_id=chat_id)
    ),
    "channel": lambda channel_id: (
        _tagged(f"channel:{channel_id}", f"for:channel:{channel_id}")
        | _with_evidence(rule=f"channel:{channel_id}")
    ),
}


class EntryTagInline(ReadOnlyInline):
    model = EntryTag
    fields = ("tag", "kind")
    ordering = ("tag",)
    verbose_name_plural = "tags"


class EntrySourceInline(ReadOnlyInline):
    model = EntrySource
    fields = ("position", "chat_link", "item_seq", "source_link")
    ordering = ("position",)
    verbose_name_plural = "sources (items of a chat, or entries)"
    source_link = staticmethod(linked("memory.entry", "source_entry_id", "source entry"))


class EvidenceInline(ReadOnlyInline):
    model = Evidence
    fields = ("rule", "organization_link", "chat_link", "item_seq")
    ordering = ("chat_id", "item_seq")
    verbose_name_plural = "evidence (the access rule of each source item) [V3]"


class ExclusionInline(ReadOnlyInline):
    model = Exclusion
    fields = ("person_link",)
    verbose_name_plural = "exclusions (people who took back their part) [P1]"


POOL_BOT = linked("openbot.bot", "bot_id", "bot (pool)")


@admin.register(Pool)
class PoolAdmin(ReadOnlyAdmin):
    list_display = (
        "__str__",
        "bot_link",
        "version",
        "settings_version",
        "concurrency",
        "budget_period",
        "budget_limit_micros",
    )
    list_filter = ("budget_period",)
    search_fields = ("=bot__id",)
    search_help_text = "A bot id (the bot that is not linked)."
    fields = (*list_display[1:], "instructions")


class ExplainForm(forms.Form):
    person = forms.CharField(required=False, label="person id")
    channel = forms.CharField(required=False, label="or channel id", help_text="its group")
    active = forms.BooleanField(
        required=False,
        label="active use",
        help_text="context, enrichment and learning; otherwise the GET memory view",
    )

    def __init__(self, data: Any, *, bots: list[tuple[str, str]]) -> None:
        super().__init__(data)
        self.fields["bot"] = forms.ChoiceField(
            choices=[(bot, f"{bot} (in {organization})") for bot, organization in bots],
            help_text="The bot the person reads through; they read in its organization.",
        )
        self.order_fields(["bot", "person", "channel", "active"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        person, channel = data.get("person") or None, data.get("channel") or None
        if (person is None) == (channel is None):
            raise forms.ValidationError("Give a person id or a channel id.")
        if person is not None and not Person.objects.filter(id=person).exists():
            self.add_error("person", f"No person with id {person}.")
        return data


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "pool_link",
        "layer",
        "status",
        "sound",
        "content_length",
        "confidence",
        "created_utc",
        "updated_utc",
    )
    list_filter = (
        "layer",
        "status",
        "sound",
        *(id_filter(name, matching=matching) for name, matching in ENTRIES_OF.items()),
    )
    search_fields = ("=id",)
    search_help_text = (
        "An entry id, or a bot, organization, person, chat or channel id: entries tagged, "
        "sourced or evidenced with it."
    )
    fields = (
        "id",
        "pool_link",
        "layer",
        "status",
        "sound",
        "rank",
        "content_length",
        "confidence",
        "created_utc",
        "updated_utc",
        "invalidated_utc",
        "said_utc",
        "related",
    )
    inlines = (EntryTagInline, EntrySourceInline, EvidenceInline, ExclusionInline)
    pool_link = staticmethod(POOL_BOT)
    created_utc = staticmethod(ms_column("created_at", "created"))
    updated_utc = staticmethod(ms_column("updated_at", "updated"))
    invalidated_utc = staticmethod(ms_column("invalidated_at", "invalidated"))
    said_utc = staticmethod(ms_column("said_at", "said"))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        for term in search_term.split():
            matches = Q(id=term)
            for matching in ENTRIES_OF.values():
                matches |= matching(term)
            queryset = queryset.filter(matches)
        return queryset, False

    @admin.display(description="related")
    def related(self, row: Entry) -> SafeString:
        return links(
            ("explain access for a person or a channel", self.explain_url(row.id)),
            ("change log", list_url("memory.changeentry", entry=row.id)),
            ("entries drawn from it", list_url("memory.entrysource", source=row.id)),
            ("what it depends on (closure)", list_url("memory.closure", entry=row.id)),
        )

    def explain_url(self, entry_id: str) -> str:
        return reverse("admin:memory_entry_explain", args=[quote(entry_id)])

    def get_urls(self) -> list[URLPattern]:
        explain = path(
            "<path:object_id>/explain/",
            self.admin_site.admin_view(self.explain_view),
            name="memory_entry_explain",
        )
        return [explain, *super().get_urls()]

    def explain_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Why a person (or a channel's group) may or may not see this entry."""
        entry = get_object_or_404(self.get_queryset(request), pk=unquote(object_id))
        bots = list(
            Bot.objects.filter(Q(id=entry.bot_id) | Q(source_id=entry.bot_id))
            .order_by("source_id", "id")
            .values_list("id", "organization_id")
        )
        form = ExplainForm(request.GET if "bot" in request.GET else None, bots=bots)
        explanation: Explanation | None = None
        if form.is_bound and form.is_valid():
            bot = Bot.objects.get(id=form.cleaned_data["bot"])
            try:
                reader = reader_for(
                    bot=bot,
                    person_id=form.cleaned_data["person"] or None,
                    channel_id=form.cleaned_data["channel"] or None,
                )
                explanation = explain_access(
                    pool_id=entry.bot_id,
                    reader=reader,
                    entry_id=entry.id,
                    active_only=form.cleaned_data["active"],
                )
            except ApplicationError as exc:
                form.add_error(None, exc.message)
        rows = [
            {
                "dependency": dependency,
                "meaning": CLAUSES[dependency.failing.split(":")[0]] if dependency.failing else "",
            }
            for dependency in (explanation.dependencies if explanation else [])
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Explain access to {entry.id}",
            "opts": self.model._meta,
            "original": entry,
            "form": form,
            "explanation": explanation,
            "rows": rows,
            "clauses": CLAUSES,
        }
        return TemplateResponse(request, "admin/memory/entry/explain.html", context)


@admin.register(EntryTag)
class EntryTagAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry_link", "tag", "kind")
    list_filter = ("kind", id_filter("entry", "entry_id"), id_filter("bot", "bot_id"))
    search_fields = ("=entry__id", "tag")
    search_help_text = "An entry id, or part of a tag (a person id finds from:/for:person:)."
    fields = ("entry_link", "pool_link", "tag", "kind")
    pool_link = staticmethod(POOL_BOT)


@admin.register(EntrySource)
class EntrySourceAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry_link", "position", "chat_link", "item_seq", "source_link")
    list_filter = (
        id_filter("entry", "entry_id"),
        id_filter("chat", "chat_id"),
        id_filter("source", "source_entry_id"),
    )
    search_fields = ("=entry__id", "=chat_id", "=source_entry_id")
    search_help_text = "An entry id (its sources, or entries drawn from it) or a chat id."
    fields = ("entry_link", "position", "chat_link", "item_seq", "source_link")
    source_link = staticmethod(linked("memory.entry", "source_entry_id", "source entry"))


@admin.register(Evidence)
class EvidenceAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry_link", "rule", "organization_link", "chat_link", "item_seq")
    list_filter = (
        id_filter("entry", "entry_id"),
        id_filter("organization", "organization_id"),
        id_filter("chat", "chat_id"),
    )
    search_fields = ("=entry__id", "rule", "=organization_id", "=chat_id")
    search_help_text = "An entry, organization or chat id, or a person or channel id in a rule."
    fields = ("entry_link", "rule", "organization_link", "chat_link", "item_seq")


@admin.register(Closure)
class ClosureAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry_link", "ancestor_link")
    list_filter = (id_filter("entry", "entry_id"), id_filter("ancestor", "ancestor_id"))
    search_fields = ("=entry__id", "=ancestor_id")
    search_help_text = "An entry id: what it depends on, or what depends on it."
    fields = ("entry_link", "ancestor_link")
    ancestor_link = staticmethod(linked("memory.entry", "ancestor_id", "depends on"))


@admin.register(Exclusion)
class ExclusionAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry_link", "person_link")
    list_filter = (id_filter("entry", "entry_id"), id_filter("person", "person_id"))
    search_fields = ("=entry__id", "=person_id")
    search_help_text = "An entry or person id."
    fields = ("entry_link", "person_link")


class ChangeEntryInline(ReadOnlyInline):
    model = ChangeEntry
    fields = ("entry_link",)
    verbose_name_plural = "entries it touched"


def _changes_touching(entry_id: str) -> Q:
    return Q(pk__in=ChangeEntry.objects.filter(entry_id=entry_id).values("change_id"))


@admin.register(Change)
class ChangeAdmin(ReadOnlyAdmin):
    list_display = ("id", "pool_link", "version", "at_utc", "by")
    list_filter = (
        "by",
        id_filter("bot", "bot_id"),
        id_filter("entry", matching=_changes_touching),
    )
    search_fields = ("=bot__id", "version__exact")
    search_help_text = "A bot id, a version, or an entry id (changes that touched it)."
    fields = ("pool_link", "version", "at_utc", "by")
    inlines = (ChangeEntryInline,)
    pool_link = staticmethod(POOL_BOT)
    at_utc = staticmethod(ms_column("at", "at"))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if search_term.strip():
            found |= queryset.filter(_changes_touching(search_term.strip()))
        return found, duplicates


@admin.register(ChangeEntry)
class ChangeEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "change_link", "entry_link")
    list_filter = (id_filter("entry", "entry_id"), id_filter("change", "change_id"))
    search_fields = ("=entry_id", "change__id__exact")
    search_help_text = "An entry id, or a change's number."
    fields = ("change_link", "entry_link")
    change_link = staticmethod(linked("memory.change", "change_id", "change"))


related_list(Organization, "memory entries", "memory.entry", "organization")
related_list(Bot, "memory entries", "memory.entry", "bot")
related_list(Bot, "memory settings", "memory.pool", "q", lambda bot: bot.pool_bot_id)
related_list(Bot, "change log", "memory.change", "bot")
