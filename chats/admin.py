from django.contrib import admin

from chats.models import Chat, Event, Item, Turn
from openbot.admin import ReadOnlyAdmin


@admin.register(Chat)
class ChatAdmin(ReadOnlyAdmin):
    list_display = ("id", "bot", "organization", "owner", "channel", "test", "created_at")


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "chat", "seq", "kind", "app", "tool", "created_at")
    exclude = ("text",)


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "chat",
        "person",
        "input_seq",
        "end_seq",
        "started_at",
        "ended_at",
        "error",
    )


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "chat", "turn", "at")
