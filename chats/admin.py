"""Chats, items, turns and the event log in the read-only admin: metadata only.

Item text is encrypted and never shown. A chat's page links its turns, items, learning runs,
model calls, confessions, enrichments and the memory entries learned from it.
"""

from django.contrib import admin
from django.utils.safestring import SafeString

from chats.models import Chat, Event, Item, Turn
from openbot.admin import ReadOnlyAdmin, id_filter, linked, related_links, related_list
from openbot.models import Bot, Organization


@admin.register(Chat)
class ChatAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "bot_link",
        "organization_link",
        "owner_link",
        "channel_link",
        "test",
        "last_seq",
        "read_position",
        "created_at",
    )
    list_filter = (
        "test",
        ("channel", admin.EmptyFieldListFilter),
        id_filter("bot", "bot_id"),
        id_filter("organization", "organization_id"),
        id_filter("person", "owner_id"),
        id_filter("channel", "channel_id"),
    )
    search_fields = ("=id", "=bot__id", "=organization__id", "=owner__id", "=channel__id")
    search_help_text = "A chat id, or a bot, organization, owner or channel id."
    fields = (*list_display, "related")
    owner_link = staticmethod(linked("openbot.person", "owner_id", "owner"))

    @admin.display(description="related")
    def related(self, row: Chat) -> SafeString:
        return related_links(row)


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "chat_link", "seq", "kind", "app", "tool", "turn_link", "created_at")
    list_filter = ("kind", id_filter("chat", "chat_id"), id_filter("turn", "turn_id"))
    search_fields = ("=chat__id", "turn__id__exact")
    search_help_text = "A chat id, or a turn's number."
    fields = ("chat_link", "seq", "kind", "app", "tool", "turn_link", "created_at")


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "chat_link",
        "person_link",
        "input_seq",
        "end_seq",
        "started_at",
        "ended_at",
        "error",
    )
    list_filter = (
        ("ended_at", admin.EmptyFieldListFilter),
        "error",
        id_filter("chat", "chat_id"),
        id_filter("person", "person_id"),
    )
    search_fields = ("id__exact", "=chat__id", "=person__id")
    search_help_text = "A turn's number, or a chat or person id."
    fields = (*list_display[1:], "related")

    @admin.display(description="related")
    def related(self, row: Turn) -> SafeString:
        return related_links(row)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "chat_link", "turn_link", "at")
    list_filter = ("kind", id_filter("chat", "chat_id"), id_filter("turn", "turn_id"))
    search_fields = ("=chat__id", "turn__id__exact")
    search_help_text = "A chat id, or a turn's number."
    fields = ("kind", "chat_link", "turn_link", "at")


related_list(Organization, "chats", "chats.chat", "organization")
related_list(Bot, "chats", "chats.chat", "bot")
related_list(Chat, "turns", "chats.turn", "chat")
related_list(Chat, "items", "chats.item", "chat")
related_list(Chat, "events", "chats.event", "chat")
related_list(Turn, "items", "chats.item", "turn")
