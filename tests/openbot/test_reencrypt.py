"""[X1] `manage.py reencrypt`: every encrypted column of every app, rotated under the first key
of OPENBOT_ENCRYPTION_KEYS, safe while the server writes."""

import io
from typing import Any

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from chats.models import Item
from memory.models import Change, Entry
from openbot.fields import EncryptionKeyError, encrypted_tables
from openbot.management.commands import reencrypt
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.test_commands import K1, K2, K3, build_pool, run


def raw_values() -> dict[tuple[str, str | None, Any], str]:
    """Every stored (non-empty) encrypted value, by (table, column, primary key)."""
    values = {}
    with connection.cursor() as cursor:
        for model, fields in encrypted_tables():
            for field in fields:
                table, column = model._meta.db_table, field.column
                key = model._meta.pk.column  # type: ignore[union-attr]
                cursor.execute(
                    f'SELECT "{key}", "{column}" FROM "{table}" '
                    f'WHERE "{column}" IS NOT NULL AND "{column}" <> \'\''
                )
                for pk, token in cursor.fetchall():
                    values[(table, column, pk)] = token
    return values


def plain_values() -> dict[str, Any]:
    """What the application reads, through the ORM."""
    return {
        "entries": dict(Entry.objects.values_list("id", "content")),
        "changes": dict(Change.objects.values_list("id", "payload")),
        "items": dict(Item.objects.values_list("id", "text")),
    }


def test_encrypted_columns_are_found_in_every_app() -> None:
    found = {
        (model._meta.label, field.name) for model, fields in encrypted_tables() for field in fields
    }

    assert {("memory.Entry", "content"), ("memory.Change", "payload"), ("chats.Item", "text")} <= (
        found
    )


def test_key_rotation_end_to_end(world: World, settings: Any) -> None:
    """[X1] Written under K1; K2 put first; reencrypt; readable with K2 alone."""
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    build_pool(world)
    before = plain_values()
    stored = raw_values()
    assert len(stored) == 3 + 5 + 6  # items, entries, change payloads
    assert all(Fernet(K1.encode()).decrypt(token.encode()) for token in stored.values())

    settings.OPENBOT_ENCRYPTION_KEYS = [K2, K1]
    assert run("reencrypt", "--batch-size", "2") == {"reencrypted": len(stored)}

    settings.OPENBOT_ENCRYPTION_KEYS = [K2]
    assert plain_values() == before
    rotated = raw_values()
    assert rotated.keys() == stored.keys()
    for where, token in rotated.items():
        assert token != stored[where]
        assert Fernet(K2.encode()).decrypt(token.encode())
        with pytest.raises(InvalidToken):
            Fernet(K1.encode()).decrypt(token.encode())
    # Running again is harmless.
    assert run("reencrypt") == {"reencrypted": len(stored)}
    assert plain_values() == before

    # [X1] A wrong key fails loudly; it never returns ciphertext as text.
    settings.OPENBOT_ENCRYPTION_KEYS = [K3]
    with pytest.raises(EncryptionKeyError):
        Entry.objects.first()
    with pytest.raises(EncryptionKeyError):
        list(Item.objects.values_list("text", flat=True))


def test_reencrypt_keeps_empty_values_empty(world: World, settings: Any) -> None:
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    build_pool(world)
    world.alice.client().post(
        f"/v1/bots/{world.bot.id}/memory/purge",
        {"tag": f"from:{world.bob.person.id}"},
        format="json",
    )
    blank = set(Change.objects.filter(payload="").values_list("id", flat=True))
    assert blank

    settings.OPENBOT_ENCRYPTION_KEYS = [K2, K1]
    run("reencrypt")

    assert set(Change.objects.filter(payload="").values_list("id", flat=True)) == blank


def test_reencrypt_never_overwrites_a_live_write(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value written between the batch's read and its update is kept, not rotated over."""
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    first, second = (
        ItemFactory.create(chat=chat, person=world.alice.person, text="first"),
        ItemFactory.create(chat=chat, person=world.alice.person, text="second"),
    )
    settings.OPENBOT_ENCRYPTION_KEYS = [K2, K1]
    real_rotate = reencrypt.rotate

    def rotate_during_a_live_write(token: str) -> str:
        if Item.objects.get(pk=first.pk).text == "first":
            Item.objects.filter(pk=first.pk).update(text="written live")
        return real_rotate(token)

    monkeypatch.setattr(reencrypt, "rotate", rotate_during_a_live_write)

    result = run("reencrypt")

    items = dict(Item.objects.values_list("pk", "text"))
    assert items[first.pk] == "written live"
    assert items[second.pk] == "second"
    # Every stored value except the one written live was rotated.
    assert result == {"reencrypted": len(raw_values()) - 1}


def test_reencrypt_stops_on_a_value_no_key_opens(world: World, settings: Any) -> None:
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    build_pool(world)
    settings.OPENBOT_ENCRYPTION_KEYS = [K2, K3]

    with pytest.raises(CommandError, match="cannot be opened") as raised:
        call_command("reencrypt", stdout=io.StringIO())

    assert "short answers" not in str(raised.value)
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    assert Entry.objects.get(layer="pinned").content == "short answers"


@pytest.mark.parametrize("size", ["0", "-3", "many", "1.5"])
def test_reencrypt_names_a_bad_batch_size(size: str) -> None:
    with pytest.raises(CommandError, match="--batch-size"):
        call_command("reencrypt", "--batch-size", size, stdout=io.StringIO())
