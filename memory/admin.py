"""[O3, X4] Memory in the read-only admin: metadata only, never decrypted content.

`Entry.content` and `Change.payload` are encrypted: they are left out of every list and page
(and `ReadOnlyAdmin` defers them in every query). Rows that point at an entry or a change show
its id, not the related object, so that no page loads — and decrypts — a related row.
"""

from typing import Any

from django.contrib import admin

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
from openbot.admin import ReadOnlyAdmin


class EntryRowAdmin(ReadOnlyAdmin):
    """A row that belongs to an entry: shows `entry_id`, never loads the entry."""

    list_select_related = ()
    readonly_fields = ("entry_ref",)

    @admin.display(description="entry", ordering="entry_id")
    def entry_ref(self, row: Any) -> str:
        return str(row.entry_id)


@admin.register(Pool)
class PoolAdmin(ReadOnlyAdmin):
    list_display = ("bot", "version", "settings_version", "concurrency", "budget_period")
    list_select_related = ("bot",)


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "pool",
        "layer",
        "status",
        "content_length",
        "sound",
        "created_at",
        "updated_at",
    )
    list_filter = ("layer", "status")
    list_select_related = ("pool",)
    exclude = ("content",)


@admin.register(EntryTag)
class EntryTagAdmin(EntryRowAdmin):
    list_display = ("id", "entry_ref", "tag", "kind")
    fields = ("entry_ref", "pool", "tag", "kind")


@admin.register(EntrySource)
class EntrySourceAdmin(EntryRowAdmin):
    list_display = ("id", "entry_ref", "position", "chat_id", "item_seq", "source_entry_id")
    fields = ("entry_ref", "position", "chat_id", "item_seq", "source_entry_id")


@admin.register(Evidence)
class EvidenceAdmin(EntryRowAdmin):
    list_display = ("id", "entry_ref", "rule", "organization_id", "chat_id", "item_seq")
    fields = ("entry_ref", "rule", "organization_id", "chat_id", "item_seq")


@admin.register(Closure)
class ClosureAdmin(EntryRowAdmin):
    list_display = ("id", "entry_ref", "ancestor_id")
    fields = ("entry_ref", "ancestor_id")


@admin.register(Exclusion)
class ExclusionAdmin(EntryRowAdmin):
    list_display = ("id", "entry_ref", "person_id")
    fields = ("entry_ref", "person_id")


@admin.register(Change)
class ChangeAdmin(ReadOnlyAdmin):
    list_display = ("id", "pool", "version", "at", "by")
    list_select_related = ("pool",)
    exclude = ("payload",)


@admin.register(ChangeEntry)
class ChangeEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "change_ref", "entry_id")
    list_select_related = ()
    readonly_fields = ("change_ref",)
    fields = ("change_ref", "entry_id")

    @admin.display(description="change", ordering="change_id")
    def change_ref(self, row: Any) -> str:
        return str(row.change_id)
