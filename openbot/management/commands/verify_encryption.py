"""[X5] Check that every stored encrypted value opens with a key in OPENBOT_ENCRYPTION_KEYS.

Scans every encrypted column of every table — found from the models, so a new column is
covered without being listed here — in batches by primary key, reading values as stored and
opening each one in this process; nothing is written and no text or ciphertext is printed.
Progress goes to stderr; stdout holds exactly one JSON object:

    {"tables": {"<table>": {"checked": rows, "unreadable": {"<column>": [ids]}}},
     "unreadable": how many values no key opens}

The exit status is 0 whether or not damage was found: the report is the result (a script
reads `unreadable`). It is 1 only when the command cannot run (no usable keys, a bad option).
"""

from typing import Any

from openbot.fields import EncryptionKeyError, encrypted_tables, stored_batches
from openbot.management.commands._encrypted import EncryptedColumnsCommand


class Command(EncryptedColumnsCommand):
    help = (
        "Check every encrypted column of every table, in batches, with the keys of "
        "OPENBOT_ENCRYPTION_KEYS; writes nothing. Prints per table the rows checked and, per "
        "column, the ids of rows whose value no key opens. Exit status 0 either way."
    )

    def scan(self, batch_size: int) -> dict[str, Any]:
        tables: dict[str, Any] = {}
        total = 0
        for model, fields in encrypted_tables():
            table = model._meta.db_table
            unreadable: dict[str, list[Any]] = {field.column_name: [] for field in fields}
            checked = 0
            for rows in stored_batches(model, fields, batch_size):
                for pk, *values in rows:
                    for field, value in zip(fields, values, strict=True):
                        try:
                            field.open(value)
                        except EncryptionKeyError:
                            unreadable[field.column_name].append(pk)
                checked += len(rows)
                self.stderr.write(f"{table}: {checked} rows checked")
            tables[table] = {"checked": checked, "unreadable": unreadable}
            total += sum(len(ids) for ids in unreadable.values())
        return {"tables": tables, "unreadable": total}
