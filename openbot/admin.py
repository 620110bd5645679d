"""[O3] A read-only admin for staff: metadata only, never decrypted content."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db.models import QuerySet
from django.http import HttpRequest

from openbot.fields import EncryptedTextField
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


def encrypted_fields(model: Any) -> list[str]:
    """The names of the model's encrypted columns."""
    return [
        field.name for field in model._meta.concrete_fields if isinstance(field, EncryptedTextField)
    ]


class ReadOnlyAdmin(admin.ModelAdmin):
    """[O3] No add, change or delete; staff see metadata, and no page decrypts content.

    Encrypted columns are deferred in every query and left out of every list and form, so a
    subclass cannot show content by naming the field, and the pages work without the keys.
    """

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        encrypted = encrypted_fields(self.model)
        return queryset.defer(*encrypted) if encrypted else queryset

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*(super().get_exclude(request, obj) or ()), *encrypted_fields(self.model)]

    def get_list_display(self, request: HttpRequest) -> list[str | Callable[[Any], str | bool]]:
        encrypted = set(encrypted_fields(self.model))
        return [name for name in super().get_list_display(request) if name not in encrypted]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        encrypted = set(encrypted_fields(self.model))
        return [name for name in super().get_readonly_fields(request, obj) if name not in encrypted]

    def has_module_permission(self, request: HttpRequest) -> bool:
        # Staff see the read-only models on the admin index without per-model permissions.
        return bool(request.user.is_active and request.user.is_staff)

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


# [O3] Every model is read-only in the admin, Django's own users and groups included:
# operators manage staff accounts with `manage.py createsuperuser`/`changepassword`.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class StaffUserAdmin(ReadOnlyAdmin):
    list_display = ("id", "username", "is_staff", "is_superuser", "is_active", "last_login")
    exclude = ("password",)


@admin.register(Group)
class StaffGroupAdmin(ReadOnlyAdmin):
    list_display = ("id", "name")
