"""[X1] Re-encrypt every encrypted column under the first key of OPENBOT_ENCRYPTION_KEYS.

Key rotation: put the new key first (keep the old ones after it), run this, then drop the old
keys. Safe while the server writes: rows are read and rewritten in batches by primary key,
each batch in its own short transaction, and a value is replaced only if it is still the one
that was read (a conditional UPDATE), so a concurrent write — already under the new key — is
never overwritten. Values are rotated as stored (`openbot.fields.rotate`, which keeps
Fernet's timestamp); no plaintext leaves the process, and none is printed.
"""

from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.db import connection, models, transaction

from openbot.fields import EncryptedTextField, EncryptionKeyError, keyring, rotate
from openbot.management.commands._json import JsonCommand


def encrypted_columns() -> list[tuple[type[models.Model], EncryptedTextField]]:
    """Every `EncryptedTextField` of every model with a table of its own."""
    return [
        (model, field)
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
        for field in model._meta.local_concrete_fields
        if isinstance(field, EncryptedTextField)
    ]


def reencrypt_column(model: type[models.Model], field: EncryptedTextField, batch_size: int) -> int:
    """Rotate the non-empty values of one column; returns how many were rewritten."""
    primary_key = model._meta.pk
    assert primary_key is not None and primary_key.column and field.column
    quote = connection.ops.quote_name
    table, column = quote(model._meta.db_table), quote(field.column)
    key = quote(primary_key.column)
    stored = f"{column} IS NOT NULL AND {column} <> ''"
    first_batch = f"SELECT {key}, {column} FROM {table} WHERE {stored} ORDER BY {key} LIMIT %s"
    next_batch = (
        f"SELECT {key}, {column} FROM {table} WHERE {key} > %s AND {stored} ORDER BY {key} LIMIT %s"
    )
    # Only if the value is still the one read: a live write in between wins.
    update = f"UPDATE {table} SET {column} = %s WHERE {key} = %s AND {column} = %s"
    rewritten = 0
    last: Any = None
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            if last is None:
                cursor.execute(first_batch, [batch_size])
            else:
                cursor.execute(next_batch, [last, batch_size])
            rows = cursor.fetchall()
            for pk, token in rows:
                try:
                    fresh = rotate(token)
                except EncryptionKeyError:
                    raise CommandError(
                        f"{model._meta.label}.{field.name} of {pk!r} cannot be opened with any "
                        "key in OPENBOT_ENCRYPTION_KEYS; batches before it are done, nothing "
                        "after it was changed"
                    ) from None
                cursor.execute(update, [fresh, pk, token])
                rewritten += cursor.rowcount
        if len(rows) < batch_size:
            return rewritten
        last = rows[-1][0]


class Command(JsonCommand):
    help = (
        "Re-encrypt every encrypted column of every model with the first key of "
        "OPENBOT_ENCRYPTION_KEYS, in batches; safe to run while the server writes. "
        'Prints {"reencrypted": N}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=500, help="rows per transaction (default 500)"
        )

    def run(self, **options: Any) -> dict[str, Any]:
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError("--batch-size: must be a positive integer")
        try:
            keyring()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        return {
            "reencrypted": sum(
                reencrypt_column(model, field, batch_size) for model, field in encrypted_columns()
            )
        }
