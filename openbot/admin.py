"""[O3] A read-only admin for staff: metadata only, never decrypted content."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from openbot.models import (
    Bot,
    Channel,
    ChannelMember,
    Grant,
    Membership,
    Organization,
    Person,
    Token,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete; encrypted fields must be left out of `exclude`-free lists."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)


@admin.register(Organization)
class OrganizationAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "bot_memory", "bot_memory_model", "created_at")


@admin.register(Person)
class PersonAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "created_at")


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("id", "organization", "person", "role")


@admin.register(Token)
class TokenAdmin(ReadOnlyAdmin):
    list_display = ("id", "person", "organization", "created_at")
    exclude = ("key_hash",)


@admin.register(Bot)
class BotAdmin(ReadOnlyAdmin):
    list_display = ("id", "organization", "name", "source", "model")


@admin.register(Grant)
class GrantAdmin(ReadOnlyAdmin):
    list_display = ("id", "bot", "level", "person", "organization")


@admin.register(Channel)
class ChannelAdmin(ReadOnlyAdmin):
    list_display = ("id", "organization", "name")


@admin.register(ChannelMember)
class ChannelMemberAdmin(ReadOnlyAdmin):
    list_display = ("id", "channel", "person")
