"""[X1] The encrypted field, through the database, with `chats.models.Item.text`.

Keys come from OPENBOT_ENCRYPTION_KEYS (the first encrypts, every key decrypts, independent of
SECRET_KEY); a wrong key fails loudly with EncryptionKeyError — never ciphertext returned as
text, and never the text or the ciphertext in the message.
"""

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from chats import services as chat_services
from chats.models import Chat, Item
from openbot import fields
from openbot.fields import EncryptionKeyError
from tests.conftest import World

SECRET = "my PIN is 4711 and I live at Kastanienallee 12"
K1 = Fernet.generate_key().decode()
K2 = Fernet.generate_key().decode()
K3 = Fernet.generate_key().decode()


@pytest.fixture
def chat(world: World) -> Chat:
    return chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=None, test=False
    )


def raw_text(item: Item) -> Any:
    """The column as stored, bypassing the field."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT text FROM {Item._meta.db_table} WHERE id = %s", [item.pk])
        return cursor.fetchone()[0]


def reload(item: Item) -> str:
    return Item.objects.get(pk=item.pk).text


def test_round_trip_and_ciphertext_at_rest(chat: Chat) -> None:
    item = chat_services.item_append(chat=chat, kind="person", text=SECRET)
    assert reload(item) == SECRET
    stored = raw_text(item)
    assert isinstance(stored, str) and stored != SECRET
    assert "4711" not in stored and "Kastanienallee" not in stored
    # A Fernet token, and one the configured keyring opens.
    assert fields.keyring().decrypt(stored.encode()).decode() == SECRET


def test_same_text_is_stored_differently_each_time(chat: Chat) -> None:
    """Ciphertext is not deterministic: nothing can be filtered or joined on it."""
    first = chat_services.item_append(chat=chat, kind="person", text=SECRET)
    second = chat_services.item_append(chat=chat, kind="person", text=SECRET)
    assert raw_text(first) != raw_text(second)
    assert reload(first) == reload(second) == SECRET


@pytest.mark.parametrize("text", ["ü€ 🧠 \u200b", "x" * 32_000, " leading and trailing "])
def test_round_trip_of_any_text(chat: Chat, text: str) -> None:
    assert reload(chat_services.item_append(chat=chat, kind="bot", text=text)) == text


def test_empty_text_is_stored_as_empty_text(chat: Chat) -> None:
    item = chat_services.item_append(chat=chat, kind="bot", text="")
    assert raw_text(item) == ""  # not NULL, not a token
    assert reload(item) == ""
    # …and read without any key: nothing was encrypted.
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K3]):
        assert reload(item) == ""


def test_keys_are_independent_of_secret_key(chat: Chat) -> None:
    """[X1] Changing SECRET_KEY leaves every row readable."""
    item = chat_services.item_append(chat=chat, kind="person", text=SECRET)
    with override_settings(SECRET_KEY="a-completely-different-secret-key-" + "x" * 30):
        assert reload(item) == SECRET


def test_rotation(chat: Chat) -> None:
    """[X1] Rotate: new key first; old rows still read; new rows use the new key."""
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K1]):
        old = chat_services.item_append(chat=chat, kind="person", text="written under K1")

    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K2, K1]):
        assert reload(old) == "written under K1"
        new = chat_services.item_append(chat=chat, kind="person", text="written under K2")
        assert reload(new) == "written under K2"

    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K2]):
        assert reload(new) == "written under K2"
        with pytest.raises(EncryptionKeyError):
            reload(old)
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K1]):
        assert reload(old) == "written under K1"
        with pytest.raises(EncryptionKeyError):
            reload(new)


def test_rotate_moves_a_value_to_the_first_key(chat: Chat) -> None:
    """`fields.rotate` is what `manage.py reencrypt` relies on to drop an old key."""
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K1]):
        item = chat_services.item_append(chat=chat, kind="person", text=SECRET)
        stored = raw_text(item)
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K2, K1]):
        rotated = fields.rotate(stored)
    assert rotated != stored
    assert Fernet(K2.encode()).decrypt(rotated.encode()).decode() == SECRET
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K3]), pytest.raises(EncryptionKeyError):
        fields.rotate(stored)


def test_wrong_key_fails_loudly_without_revealing_anything(chat: Chat) -> None:
    item = chat_services.item_append(chat=chat, kind="person", text=SECRET)
    stored = raw_text(item)
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K3]):
        with pytest.raises(EncryptionKeyError) as raised:
            reload(item)
        with pytest.raises(EncryptionKeyError):
            list(Item.objects.filter(chat=chat))
    message = str(raised.value)
    assert "OPENBOT_ENCRYPTION_KEYS" in message
    assert SECRET not in message and "4711" not in message
    assert stored not in message and stored[:20] not in message
    # Nothing chained that would print the token in a traceback.
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


def test_metadata_reads_need_no_key(chat: Chat) -> None:
    """Deferring the column decrypts nothing: metadata stays readable with a wrong key."""
    chat_services.item_append(chat=chat, kind="person", text=SECRET)
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[K3]):
        assert [item.kind for item in Item.objects.filter(chat=chat).defer("text")] == ["person"]
        assert list(Item.objects.filter(chat=chat).values_list("seq", flat=True)) == [1]


def test_no_key_or_a_bad_key_is_improperly_configured(chat: Chat) -> None:
    for keys in ([], ["not-a-fernet-key"]):
        with override_settings(OPENBOT_ENCRYPTION_KEYS=keys):
            with pytest.raises(ImproperlyConfigured) as raised:
                chat_services.item_append(chat=chat, kind="person", text=SECRET)
            assert "not-a-fernet-key" not in str(raised.value)
