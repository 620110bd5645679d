"""[X5] The encrypted field and its row readers with damaged values: the field's error names
where (table and column), never what; `readable` and `readable_values` leave out exactly the
rows no key opens, log table, row id and column, and never log ciphertext or content."""

import logging

import pytest
from cryptography.fernet import Fernet
from django.test import override_settings

from chats import services as chat_services
from chats.models import Chat, Item
from memorybot.models import Enrichment
from openbot.fields import EncryptionKeyError, readable, readable_values
from tests.conftest import World
from tests.openbot.damage import flip_a_byte, stored_value, truncate

TEXTS = ["first words 1111", "second words 2222", "third words 3333"]


@pytest.fixture
def items(world: World) -> list[Item]:
    chat: Chat = chat_services.chat_create(
        caller=world.alice.caller, bot_id=world.bot.id, channel_id=None, test=False
    )
    return [chat_services.item_append(chat=chat, kind="person", text=text) for text in TEXTS]


def assert_logged_where_not_what(
    caplog: pytest.LogCaptureFixture, ids: list[object], tokens: list[str]
) -> None:
    """One line per left-out row, naming table, id and column; no token, no text."""
    lines = [record.getMessage() for record in caplog.records if record.name == "openbot.fields"]
    assert lines == [
        f"left out a row no key opens: table=chats_item id={pk} column=text" for pk in ids
    ]
    logged = caplog.text
    for token in tokens:
        assert token[:16] not in logged and token[-16:] not in logged
    for text in TEXTS:
        assert text not in logged and text[-4:] not in logged


def test_the_fields_error_names_table_and_column_and_nothing_else(items: list[Item]) -> None:
    token = flip_a_byte(Item, items[1].pk, "text")
    with pytest.raises(EncryptionKeyError) as raised:
        Item.objects.get(pk=items[1].pk)
    assert (raised.value.table, raised.value.column) == ("chats_item", "text")
    message = str(raised.value)
    assert "chats_item.text" in message and "OPENBOT_ENCRYPTION_KEYS" in message
    assert token[:16] not in message and stored_value(Item, items[1].pk, "text")[:16] not in message
    assert TEXTS[1] not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


@pytest.mark.parametrize("damage", [flip_a_byte, truncate])
def test_readable_leaves_out_only_the_damaged_row(
    items: list[Item], damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    token = damage(Item, items[1].pk, "text")  # type: ignore[operator]
    caplog.set_level(logging.WARNING)

    rows = readable(Item.objects.filter(chat=items[0].chat).order_by("seq"))

    assert [(row.pk, row.text) for row in rows] == [
        (items[0].pk, TEXTS[0]),
        (items[2].pk, TEXTS[2]),
    ]
    assert all(not row.get_deferred_fields() for row in rows)  # the text is loaded, not deferred
    assert_logged_where_not_what(
        caplog, [items[1].pk], [token, stored_value(Item, items[1].pk, "text")]
    )


def test_readable_values_leaves_out_only_the_damaged_row(
    items: list[Item], caplog: pytest.LogCaptureFixture
) -> None:
    token = flip_a_byte(Item, items[0].pk, "text")
    caplog.set_level(logging.WARNING)

    rows = readable_values(Item.objects.order_by("seq"), "id", "seq", "text")

    assert rows == [
        {"id": items[1].pk, "seq": 2, "text": TEXTS[1]},
        {"id": items[2].pk, "seq": 3, "text": TEXTS[2]},
    ]
    assert_logged_where_not_what(caplog, [items[0].pk], [token])


def test_a_dropped_key_leaves_out_every_row_it_wrote(
    items: list[Item], caplog: pytest.LogCaptureFixture
) -> None:
    tokens = [stored_value(Item, item.pk, "text") for item in items]
    caplog.set_level(logging.WARNING)
    with override_settings(OPENBOT_ENCRYPTION_KEYS=[Fernet.generate_key().decode()]):
        later = chat_services.item_append(chat=items[0].chat, kind="bot", text="under the new key")
        empty = chat_services.item_append(chat=items[0].chat, kind="bot", text="")

        rows = readable(Item.objects.order_by("seq"))

    assert [(row.pk, row.text) for row in rows] == [(later.pk, "under the new key"), (empty.pk, "")]
    assert_logged_where_not_what(caplog, [item.pk for item in items], tokens)


def test_nothing_damaged_nothing_left_out(
    items: list[Item], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    assert [row.text for row in readable(Item.objects.order_by("seq"))] == TEXTS
    assert [row["text"] for row in readable_values(Item.objects.order_by("seq"), "id", "text")] == (
        TEXTS
    )
    assert caplog.records == []


def test_rows_of_two_columns_keep_each_value_in_its_place(
    items: list[Item], caplog: pytest.LogCaptureFixture
) -> None:
    """A list's values are opened together: with two encrypted columns, NULL and '' among
    them, each text lands in its own row and column, and a row with one damaged value is left
    out, named by that column."""
    chat = items[0].chat
    turn = chat_services.turn_start(chat=chat, person=chat.owner, text="a turn")
    values = [("rewritten one", "said one"), ("rewritten two", None), ("", "said three")]
    rows = [
        Enrichment.objects.create(chat=chat, turn=turn, text=text, original=original)
        for text, original in values
    ]
    damaged = Enrichment.objects.create(chat=chat, turn=turn, text="kept", original="damaged")
    flip_a_byte(Enrichment, damaged.pk, "original")
    chat_services.turn_end(turn=turn)
    caplog.set_level(logging.WARNING)
    expected = [(row.pk, *value) for row, value in zip(rows, values, strict=True)]

    listed = readable_values(Enrichment.objects.order_by("pk"), "id", "text", "original")
    loaded = readable(Enrichment.objects.order_by("pk"))

    assert [(row["id"], row["text"], row["original"]) for row in listed] == expected
    assert [(row.pk, row.text, row.original) for row in loaded] == expected
    assert [record.getMessage() for record in caplog.records] == 2 * [
        f"left out a row no key opens: table=memorybot_enrichment id={damaged.pk} column=original"
    ]
