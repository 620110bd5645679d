"""[O3, O5] A read-only admin for support staff: metadata only, never decrypted content.

Every page searches by the ids that link its rows (organization, person, bot, chat, entry …),
filters by the dimensions staff slice by, and links related rows by id — built from the row's
own `*_id` columns, so a list page loads no related row (no query per row, and nothing that
could hold content). Times stored as epoch milliseconds are shown as UTC date-times.
"""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import Group, User
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

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

admin.site.site_header = "OpenBot Bot Memory — support"
admin.site.site_title = "OpenBot Bot Memory support"
admin.site.index_title = "Read-only: metadata, never content"
# There is no site to view (the service is an API): no "View site" link.
admin.site.site_url = None


def encrypted_fields(model: Any) -> list[str]:
    """The names of the model's encrypted columns."""
    return [
        field.name for field in model._meta.concrete_fields if isinstance(field, EncryptedTextField)
    ]


def ms_time(ms: int | None) -> str:
    """Epoch milliseconds as a UTC date-time."""
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d} UTC"


def change_link(label: str, pk: Any, text: Any = None) -> str:
    """A link to the admin page of one row of `label` ("app.model"), from its id alone."""
    if pk is None or pk == "":
        return "-"
    app_label, model_name = label.split(".")
    url = reverse(f"admin:{app_label}_{model_name}_change", args=[quote(pk)])
    return format_html('<a href="{}">{}</a>', url, pk if text is None else text)


def list_url(label: str, **params: Any) -> str:
    """The admin list of `label` ("app.model") narrowed by filters or a search (`q`)."""
    app_label, model_name = label.split(".")
    return f"{reverse(f'admin:{app_label}_{model_name}_changelist')}?{urlencode(params)}"


def links(*pairs: tuple[str, str]) -> SafeString:
    """(text, url) pairs as a line of links."""
    return format_html_join(" · ", '<a href="{}">{}</a>', ((url, text) for text, url in pairs))


# The lists of other apps' rows a row's page links to ("related"), by the row's model: each
# app's admin adds its own (`related_list`), so no floor names the apps above it.
_related: dict[type[Any], list[tuple[str, str, str, Callable[[Any], Any]]]] = {}


def related_list(
    owner: type[Any],
    text: str,
    label: str,
    field: str,
    value: Callable[[Any], Any] = lambda row: row.pk,
) -> None:
    """Link the page of an `owner` row to the list of `label` ("app.model") narrowed by
    `field` = `value(row)` (by default the row's primary key)."""
    _related.setdefault(owner, []).append((text, label, field, value))


def related_links(row: Any) -> SafeString:
    """The links `related_list` registered for `row`'s model, in the order they were."""
    return links(
        *(
            (text, list_url(label, **{field: value(row)}))
            for text, label, field, value in _related.get(type(row), [])
        )
    )


class IdFilter(admin.SimpleListFilter):
    """A sidebar box that narrows the list to rows linked to one id (a person, a chat …).

    A box, not a list of choices: there may be a million people. Subclasses name the fields
    that hold the id (a row matches when any does) or override `matching`.
    """

    template = "admin/openbot/id_filter.html"
    fields: tuple[str, ...] = ()

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # One placeholder choice, so that Django shows the filter; the template draws a box.
        return [("", "")]

    def matching(self, value: str) -> Q:
        return Q.create([(field, value) for field in self.fields], connector=Q.OR)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = (self.value() or "").strip()
        return queryset.filter(self.matching(value)) if value else queryset

    def choices(self, changelist: ChangeList) -> Iterator[Any]:
        yield {
            "parameter": self.parameter_name,
            "value": self.value() or "",
            "placeholder": f"{self.title} id",
            "others": [
                (name, value)
                for name, value in changelist.params.items()
                if name != self.parameter_name
            ],
            "clear": changelist.get_query_string(remove=[str(self.parameter_name)]),
        }


def id_filter(
    parameter: str, *fields: str, matching: Callable[[str], Q] | None = None
) -> type[IdFilter]:
    """An `IdFilter` on `?<parameter>=<id>`: over `fields`, or rows `matching(id)` selects."""
    attributes: dict[str, Any] = {"parameter_name": parameter, "title": parameter, "fields": fields}
    if matching is not None:
        attributes["matching"] = lambda self, value: matching(value)
    return type(f"{parameter.title()}IdFilter", (IdFilter,), attributes)


def linked(label: str, attname: str, description: str) -> Callable[[Any], str]:
    """A column or page field: the row's `attname` id as a link to that row of `label`."""

    @admin.display(description=description, ordering=attname)
    def show(row: Any) -> str:
        return change_link(label, getattr(row, attname))

    show.__name__ = f"{attname}_link"
    return show


def ms_column(attname: str, description: str) -> Callable[[Any], str]:
    """A column or page field: the row's epoch-milliseconds `attname` as a UTC date-time."""

    @admin.display(description=description, ordering=attname)
    def show(row: Any) -> str:
        return ms_time(getattr(row, attname))

    show.__name__ = f"{attname}_utc"
    return show


class IdLinks:
    """Links to the rows a row names by id, for `list_display`, `fields` and `readonly_fields`
    of admin pages and inlines (by name: `"person_link"`)."""

    organization_link = staticmethod(
        linked("openbot.organization", "organization_id", "organization")
    )
    person_link = staticmethod(linked("openbot.person", "person_id", "person"))
    bot_link = staticmethod(linked("openbot.bot", "bot_id", "bot"))
    channel_link = staticmethod(linked("openbot.channel", "channel_id", "channel"))
    chat_link = staticmethod(linked("chats.chat", "chat_id", "chat"))
    turn_link = staticmethod(linked("chats.turn", "turn_id", "turn"))
    entry_link = staticmethod(linked("memory.entry", "entry_id", "entry"))


class StaffReadOnly:
    """Staff may view; nobody may add, change or delete. Every field a page names is
    read-only, links and times included."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        declared = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        names = [*declared, *(getattr(self, "fields", None) or ())]
        encrypted = set(encrypted_fields(self.model))  # type: ignore[attr-defined]
        return [name for name in dict.fromkeys(names) if name not in encrypted]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)


class ReadOnlyAdmin(StaffReadOnly, IdLinks, admin.ModelAdmin):
    """No add, change or delete; staff see metadata, and no page decrypts content.

    Encrypted columns are deferred in every query and left out of every list and form, so a
    subclass cannot show content by naming the field, and the pages work without the keys.
    """

    # Facet counts would run one count per choice of every filter on every page.
    show_facets = admin.ShowFacets.NEVER

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        encrypted = encrypted_fields(self.model)
        return queryset.defer(*encrypted) if encrypted else queryset

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*(super().get_exclude(request, obj) or ()), *encrypted_fields(self.model)]

    def get_list_display(self, request: HttpRequest) -> list[str | Callable[[Any], str | bool]]:
        encrypted = set(encrypted_fields(self.model))
        return [name for name in super().get_list_display(request) if name not in encrypted]

    def has_module_permission(self, request: HttpRequest) -> bool:
        # Staff see the read-only models on the admin index without per-model permissions.
        return bool(request.user.is_active and request.user.is_staff)


class ReadOnlyInline(StaffReadOnly, IdLinks, admin.TabularInline):
    """Related rows listed on a page, read-only, for staff."""

    extra = 0
    can_delete = False


@admin.register(Organization)
class OrganizationAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "bot_memory", "bot_memory_model", "created_at")
    list_filter = ("bot_memory", "bot_memory_model")
    search_fields = ("=id", "name")
    search_help_text = "An organization id, or part of a name."
    fields = ("id", "name", "bot_memory", "bot_memory_model", "created_at", "related")

    @admin.display(description="related")
    def related(self, row: Organization) -> SafeString:
        return related_links(row)


@admin.register(Person)
class PersonAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "created_at")
    list_filter = (id_filter("organization", "memberships__organization_id"),)
    search_fields = ("=id", "name")
    search_help_text = "A person id, or part of a name."
    fields = ("id", "name", "created_at", "related")

    @admin.display(description="related")
    def related(self, row: Person) -> SafeString:
        return links(
            ("memberships", list_url("openbot.membership", person=row.id)),
            ("channels", list_url("openbot.channelmember", person=row.id)),
            ("grants", list_url("openbot.grant", person=row.id)),
            ("tokens", list_url("openbot.token", person=row.id)),
            ("chats owned", list_url("chats.chat", person=row.id)),
            ("turns", list_url("chats.turn", person=row.id)),
            ("memory entries about or for them", list_url("memory.entry", person=row.id)),
        )


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("id", "organization_link", "person_link", "role")
    list_filter = (
        "role",
        id_filter("organization", "organization_id"),
        id_filter("person", "person_id"),
    )
    search_fields = ("=organization__id", "=person__id")
    search_help_text = "An organization or person id."
    fields = ("organization_link", "person_link", "role")


@admin.register(Token)
class TokenAdmin(ReadOnlyAdmin):
    list_display = ("id", "person_link", "organization_link", "created_at")
    list_filter = (id_filter("organization", "organization_id"), id_filter("person", "person_id"))
    search_fields = ("=person__id", "=organization__id")
    search_help_text = "A person or organization id."
    fields = ("person_link", "organization_link", "created_at")


@admin.register(Bot)
class BotAdmin(ReadOnlyAdmin):
    source_link = staticmethod(linked("openbot.bot", "source_id", "linked to (source bot)"))
    list_display = ("id", "name", "organization_link", "source_link", "model", "created_at")
    list_filter = (
        ("source", admin.EmptyFieldListFilter),
        id_filter("organization", "organization_id"),
    )
    search_fields = ("=id", "=organization__id", "=source__id", "name")
    search_help_text = "A bot id (a linked bot's source too), an organization id, or a name."
    fields = ("id", "name", "organization_link", "source_link", "model", "created_at", "related")

    @admin.display(description="related")
    def related(self, row: Bot) -> SafeString:
        return related_links(row)


@admin.register(Grant)
class GrantAdmin(ReadOnlyAdmin):
    list_display = ("id", "bot_link", "level", "person_link", "organization_link")
    list_filter = (
        "level",
        id_filter("bot", "bot_id"),
        id_filter("person", "person_id"),
        id_filter("organization", "organization_id"),
    )
    search_fields = ("=bot__id", "=person__id", "=organization__id")
    search_help_text = "A bot, person or organization id."
    fields = ("bot_link", "level", "person_link", "organization_link")


@admin.register(Channel)
class ChannelAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "organization_link")
    list_filter = (id_filter("organization", "organization_id"),)
    search_fields = ("=id", "=organization__id", "name")
    search_help_text = "A channel or organization id, or part of a name."
    fields = ("id", "name", "organization_link", "related")

    @admin.display(description="related")
    def related(self, row: Channel) -> SafeString:
        return links(
            ("members", list_url("openbot.channelmember", channel=row.id)),
            ("group chats", list_url("chats.chat", channel=row.id)),
            ("memory entries", list_url("memory.entry", channel=row.id)),
        )


@admin.register(ChannelMember)
class ChannelMemberAdmin(ReadOnlyAdmin):
    list_display = ("id", "channel_link", "person_link")
    list_filter = (id_filter("channel", "channel_id"), id_filter("person", "person_id"))
    search_fields = ("=channel__id", "=person__id")
    search_help_text = "A channel or person id."
    fields = ("channel_link", "person_link")


# Every model is read-only in the admin, Django's own users and groups included:
# operators manage staff accounts with `manage.py createsuperuser`/`changepassword`.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class StaffUserAdmin(ReadOnlyAdmin):
    list_display = ("id", "username", "is_staff", "is_superuser", "is_active", "last_login")
    list_filter = ("is_staff", "is_superuser", "is_active")
    search_fields = ("username",)
    exclude = ("password",)


@admin.register(Group)
class StaffGroupAdmin(ReadOnlyAdmin):
    list_display = ("id", "name")
    search_fields = ("name",)


related_list(Organization, "people", "openbot.person", "organization")
related_list(Organization, "bots", "openbot.bot", "organization")
related_list(Organization, "channels", "openbot.channel", "organization")
related_list(Bot, "grants", "openbot.grant", "bot")
related_list(Bot, "linked bots", "openbot.bot", "q")
