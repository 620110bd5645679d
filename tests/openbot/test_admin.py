"""[O3, X4] The admin is read-only for staff and shows metadata only: no add, change or delete
on any model, no page decrypts content, and `__str__` shows ids, never content (Django stores
`str(obj)[:200]` in the admin log)."""

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group, User
from django.db.models import Model
from django.test import Client, override_settings
from django.urls import reverse

from chats import services as chat_services
from conversations.turns import turn_run
from memory.services import entry_remember
from memorybot.confide import confide_hear
from memorybot.models import (
    Confession,
    Enrichment,
    EnrichmentEntry,
    LearningRun,
    ModelCallEntry,
)
from openbot import services
from openbot.fields import EncryptedTextField
from tests.conftest import World

CANARY = "canary-7f3a9 my blood type is AB negative"
CANARY_MARK = "canary-7f3a9"


# The product's apps. django.contrib.auth's User and Group keep Django's own admin: they are
# the staff accounts themselves, managed by superusers, and hold no memory or chat content.
PRODUCT_APPS = {"openbot", "chats", "memory", "memorybot"}


def registered_models() -> list[type[Model]]:
    """Every product model registered in the admin, including those added later."""
    return sorted(
        (model for model in admin.site._registry if model._meta.app_label in PRODUCT_APPS),
        key=lambda model: model._meta.label,
    )


def url(model: type[Model], view: str, *args: Any) -> str:
    # Object ids are quoted as the admin quotes them: `u_22…` would otherwise unquote to `u"…`.
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}"
    return reverse(name, args=[quote(arg) for arg in args])


@pytest.fixture
def content(world: World) -> World:
    """Chats, turns, items, tool results and notices carrying the canary."""
    services_chat = chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=world.channel.id, test=False
    )
    turn = chat_services.turn_start(chat=services_chat, person=world.alice.person, text=CANARY)
    chat_services.item_append(chat=services_chat, kind="bot", text=CANARY, turn=turn)
    chat_services.tool_result_append(
        chat=services_chat, app="calendar", tool="lookup", text=CANARY, turn=turn
    )
    chat_services.turn_end(turn=turn)
    chat_services.notice_append(chat=services_chat, text=CANARY)
    # The memory bot's records of the turn [O3]: confessions and enrichments are content too.
    services.organization_settings_update(
        organization=world.org, bot_memory_model="offline:extractive"
    )
    services_chat.refresh_from_db()
    confide_hear(turn=turn, text=CANARY)  # a confession and a learning run
    Enrichment.objects.create(
        chat=services_chat, turn=turn, text=CANARY, original=CANARY, entry_ids=[]
    )
    # [P4] A turn enriched with an entry: the rows that link the copies to the entry.
    private = chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=None, test=False
    )
    entry_remember(
        pool_id=world.bot.id,
        person_id=world.alice.person.id,
        organization_id=world.org.id,
        content=CANARY,
        topics=[],
    )
    turn_run(chat=private, person=world.alice.person, text=CANARY)
    assert EnrichmentEntry.objects.exists() and ModelCallEntry.objects.exists()
    return world


def test_every_model_is_registered_read_only() -> None:
    """[O3] Each registered ModelAdmin refuses add, change and delete to everyone."""
    superuser = User(username="root", is_staff=True, is_superuser=True, is_active=True)
    request: Any = type("Request", (), {"user": superuser})()
    assert registered_models()
    for model in registered_models():
        model_admin = admin.site._registry[model]
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.has_delete_permission(request), model
        assert model_admin.has_view_permission(request), model


def test_staff_sees_every_changelist(content: World, staff: Client) -> None:
    for model in registered_models():
        response = staff.get(url(model, "changelist"))
        assert response.status_code == 200, model
        page = response.content.decode()
        assert 'class="addlink"' not in page, model
        assert CANARY_MARK not in page, model


def test_staff_sees_the_admin_index_and_app_pages(content: World, staff: Client) -> None:
    response = staff.get(reverse("admin:index"))
    assert response.status_code == 200
    page = response.content.decode()
    for model in registered_models():
        assert url(model, "changelist") in page, model
    for app_label in {model._meta.app_label for model in registered_models()}:
        assert staff.get(reverse("admin:app_list", args=[app_label])).status_code == 200


def test_add_change_and_delete_are_forbidden(content: World, staff: Client) -> None:
    for model in registered_models():
        assert staff.get(url(model, "add")).status_code == 403, model
        assert staff.post(url(model, "add"), {}).status_code == 403, model
        obj = model._default_manager.first()
        if obj is None:
            continue
        change = url(model, "change", obj.pk)
        assert staff.post(change, {}).status_code == 403, model
        assert staff.get(url(model, "delete", obj.pk)).status_code == 403, model
        assert staff.post(url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
        assert model._default_manager.filter(pk=obj.pk).exists(), model


def test_bulk_delete_action_is_not_offered(content: World, staff: Client) -> None:
    for model in registered_models():
        page = staff.get(url(model, "changelist")).content.decode()
        assert "delete_selected" not in page, model


def test_detail_pages_show_metadata_without_content(content: World, staff: Client) -> None:
    """[O3] Detail (view-only) and history pages of every object hold no content."""
    seen = 0
    for model in registered_models():
        for obj in model._default_manager.all()[:20]:
            for view in ("change", "history"):
                response = staff.get(url(model, view, obj.pk))
                assert response.status_code == 200, (model, view)
                page = response.content.decode()
                assert CANARY_MARK not in page, (model, view)
                assert 'type="submit" value="Save"' not in page, model
            seen += 1
    assert seen > 10


def test_no_admin_page_decrypts_content(content: World, staff: Client) -> None:
    """[O3] With a key that opens nothing, every page still works: none of them decrypted."""
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[Fernet.generate_key().decode()]):
        for model in registered_models():
            assert staff.get(url(model, "changelist")).status_code == 200, model
            encrypted = [
                field.name
                for field in model._meta.concrete_fields
                if isinstance(field, EncryptedTextField)
            ]
            for obj in model._default_manager.all().defer(*encrypted)[:20]:
                assert staff.get(url(model, "change", obj.pk)).status_code == 200, model


def test_str_of_every_instance_shows_no_content(content: World) -> None:
    """[O3] `__str__` shows ids, never content."""
    count = 0
    for model in registered_models():
        for obj in model._default_manager.all():
            text = str(obj)
            assert CANARY_MARK not in text, (model, text)
            assert len(text) <= 200, (model, text)
            count += 1
    assert count > 10


def test_non_staff_is_sent_to_the_login_page(content: World, db: Any) -> None:
    user = User.objects.create_user(username="visitor", password="pw-visitor")
    member = Client()
    member.force_login(user)
    anonymous = Client()
    model = registered_models()[0]
    for client in (member, anonymous):
        for target in (reverse("admin:index"), url(model, "changelist")):
            response = client.get(target)
            assert response.status_code == 302, target
            assert response["Location"].startswith(reverse("admin:login")), target


def test_inactive_staff_is_sent_to_the_login_page(content: World, db: Any) -> None:
    user = User.objects.create_user(username="gone", password="pw-gone", is_staff=True)
    user.is_active = False
    user.save(update_fields=["is_active"])
    client = Client()
    client.force_login(user)
    response = client.get(url(registered_models()[0], "changelist"))
    assert response.status_code == 302


def test_api_tokens_do_not_open_the_admin(content: World) -> None:
    """The admin uses staff sessions only; an API bearer token is not a login."""
    client = Client(HTTP_AUTHORIZATION=f"Bearer {content.alice.token}")
    assert client.get(reverse("admin:index")).status_code == 302


def test_staff_accounts_and_groups_are_read_only_too() -> None:
    """[O3] "Read-only for every model": Django's users and groups included."""
    superuser = User(username="root", is_staff=True, is_superuser=True, is_active=True)
    request: Any = type("Request", (), {"user": superuser})()
    for model in (User, Group):
        model_admin = admin.site._registry[model]
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.has_delete_permission(request), model


def test_the_memory_bots_records_are_in_the_admin(content: World) -> None:
    """[O3] Confessions, enrichments and learning runs are registered (metadata only)."""
    assert Confession.objects.exists() and LearningRun.objects.exists()
    for model in (Confession, Enrichment, LearningRun):
        assert model in admin.site._registry, model
