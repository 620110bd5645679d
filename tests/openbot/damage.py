"""Damage stored ciphertext the way a disk or an operator does [X5]: straight in the database,
with raw SQL, never through the field."""

import io
import json
from typing import Any

from django.core.management import call_command
from django.db import connection, models

from memory.vectors import vectors_fill
from openbot.fields import EncryptedTextField
from tests.conftest import World
from tests.factories import EntryFactory
from tests.memorybot.scenes import (
    OFFLINE_MODEL,
    bot_model_set,
    chat_open,
    memory_model_set,
    take_turn,
)


def _names(model: type[models.Model], field_name: str) -> tuple[str, str, str]:
    quote = connection.ops.quote_name
    primary_key = model._meta.pk
    assert primary_key is not None
    field = model._meta.get_field(field_name)
    assert isinstance(field, EncryptedTextField) and primary_key.column
    return quote(model._meta.db_table), quote(field.column_name), quote(primary_key.column)


def stored_value(model: type[models.Model], pk: Any, field_name: str) -> str:
    """The value of one encrypted column as stored: its ciphertext."""
    table, column, key = _names(model, field_name)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE {key} = %s", [pk])
        value: str = cursor.fetchone()[0]
    return value


def store_raw(model: type[models.Model], pk: Any, field_name: str, value: str) -> None:
    table, column, key = _names(model, field_name)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE {key} = %s", [value, pk])
        assert cursor.rowcount == 1


def flip_a_byte(model: type[models.Model], pk: Any, field_name: str) -> str:
    """Change one character in the middle of a stored token; returns the token as it was."""
    token = stored_value(model, pk, field_name)
    assert token, "only a stored (non-empty) value can be damaged"
    middle = len(token) // 2
    flipped = "A" if token[middle] != "A" else "B"
    store_raw(model, pk, field_name, token[:middle] + flipped + token[middle + 1 :])
    return token


def truncate(model: type[models.Model], pk: Any, field_name: str) -> str:
    """Cut a stored token short; returns the token as it was."""
    token = stored_value(model, pk, field_name)
    store_raw(model, pk, field_name, token[: len(token) - 7])
    return token


def chat_filling_every_encrypted_column(world: World) -> str:
    """Two turns of alice with the offline bot and memory bot: entries with their vectors and
    change log, items, confessions, enrichments (with originals) and model calls all hold
    stored values.
    Returns the chat's id."""
    memory_model_set(world.org, OFFLINE_MODEL)
    bot_model_set(world.bot, OFFLINE_MODEL)
    EntryFactory.create(
        author=world.alice, bot=world.bot, content="The Basel train leaves at nine from track seven"
    )
    EntryFactory.create(
        author=world.alice, bot=world.bot, content="Alice likes window seats on the Basel train"
    )
    chat_id = chat_open(world.alice, world.bot)
    take_turn(world.alice, chat_id, "I need the Basel train tomorrow.")
    take_turn(world.alice, chat_id, "Which track for the Basel train?")
    vectors_fill(world.bot.id)  # what the worker does after the entries are written [R6]
    return chat_id


def verify_encryption(*args: str) -> tuple[dict[str, Any], str]:
    """`manage.py verify_encryption`: its one JSON object, and what it wrote on stderr."""
    out, err = io.StringIO(), io.StringIO()
    call_command("verify_encryption", *args, stdout=out, stderr=err)
    text = out.getvalue()
    report: dict[str, Any] = json.loads(text)
    assert text.strip() == json.dumps(report), "exactly one JSON object"
    return report, err.getvalue()


def unreadable_in(report: dict[str, Any]) -> set[tuple[str, str, Any]]:
    """(table, column, id) of every value the report names as unreadable."""
    return {
        (table, column, pk)
        for table, scanned in report["tables"].items()
        for column, ids in scanned["unreadable"].items()
        for pk in ids
    }
