"""Re-encrypt every encrypted column under the first key of OPENBOT_ENCRYPTION_KEYS.

Key rotation: put the new key first (keep the old ones after it), run this, then drop the old
keys. Safe while the server writes: rows are read in batches by primary key, each batch is
rewritten in its own short transaction, and a value is replaced only if it is still the one
that was read (a conditional UPDATE), so a concurrent write — already under the new key — is
never overwritten. Values are rotated as stored (`openbot.fields.rotate`, which keeps
Fernet's timestamp); no plaintext leaves the process, and none is printed.
"""

from typing import Any

from django.core.management.base import CommandError
from django.db import connection, models, transaction

from openbot.fields import (
    EncryptedTextField,
    EncryptionKeyError,
    encrypted_tables,
    rotate,
    stored_batches,
)
from openbot.management.commands._encrypted import EncryptedColumnsCommand


def reencrypt_table(
    model: type[models.Model], fields: list[EncryptedTextField], batch_size: int
) -> int:
    """Rotate the non-empty values of one table's encrypted columns; returns how many were
    rewritten."""
    primary_key = model._meta.pk
    assert primary_key is not None and primary_key.column
    quote = connection.ops.quote_name
    table, key = quote(model._meta.db_table), quote(primary_key.column)
    rewritten = 0
    for rows in stored_batches(model, fields, batch_size):
        with transaction.atomic(), connection.cursor() as cursor:
            for pk, *tokens in rows:
                for field, token in zip(fields, tokens, strict=True):
                    if not token:
                        continue
                    try:
                        fresh = rotate(token)
                    except EncryptionKeyError:
                        raise CommandError(
                            f"{model._meta.label}.{field.name} of {pk!r} cannot be opened with "
                            "any key in OPENBOT_ENCRYPTION_KEYS; batches before it are done, "
                            "nothing after it was changed"
                        ) from None
                    column = quote(field.column_name)
                    # Only if the value is still the one read: a live write in between wins.
                    cursor.execute(
                        f"UPDATE {table} SET {column} = %s WHERE {key} = %s AND {column} = %s",
                        [fresh, pk, token],
                    )
                    rewritten += cursor.rowcount
    return rewritten


class Command(EncryptedColumnsCommand):
    help = (
        "Re-encrypt every encrypted column of every model with the first key of "
        "OPENBOT_ENCRYPTION_KEYS, in batches; safe to run while the server writes. "
        'Prints {"reencrypted": N}.'
    )

    def scan(self, batch_size: int) -> dict[str, Any]:
        return {
            "reencrypted": sum(
                reencrypt_table(model, fields, batch_size) for model, fields in encrypted_tables()
            )
        }
