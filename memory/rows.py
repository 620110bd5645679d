"""An entry as a row, as routes show it (its fields, tags and sources, read with it in one
query), and as a line of a context.
"""

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import QuerySet, TextField
from django.db.models.expressions import RawSQL

from memory.models import Entry, EntrySource, EntryTag
from openbot.fields import readable_rows

# Each entry of a context is a line "- <content>\n".
CONTEXT_LINE_OVERHEAD = len("- \n")

# The columns of an entry's row; `content` is decrypted as it is read.
ENTRY_FIELDS = (
    "id",
    "layer",
    "content",
    "status",
    "created_at",
    "updated_at",
    "invalidated_at",
    "said_at",
    "confidence",
)


def entry_row(entry: Entry) -> dict[str, Any]:
    """An entry just written as `EntryOutput` shows it, from the row in hand and its
    tags and sources: its content is not read back or decrypted, so there is nothing damaged to
    fail on."""
    details = with_details(Entry.objects.filter(id=entry.id)).values(*DETAILS).get()
    return with_tags_and_sources([{name: getattr(entry, name) for name in ENTRY_FIELDS} | details])[
        0
    ]


# An entry's tags and sources, each an array read with the entry: the tags in the order
# they were added, the sources as [chat, item, entry] in their order. PostgreSQL's own
# arrays (psycopg reads them faster than JSON; the item as text there), JSON on SQLite.
_DETAILS_SQL = {
    "postgresql": {
        "tags": "ARRAY(SELECT t.tag FROM {tag} t WHERE t.entry_id = {entry}.id ORDER BY t.id)",
        "sources": "ARRAY(SELECT ARRAY[s.chat_id, s.item_seq::text, s.source_entry_id] "
        "FROM {source} s WHERE s.entry_id = {entry}.id ORDER BY s.position)",
    },
    "sqlite": {
        "tags": "SELECT json_group_array(tag) FROM (SELECT t.tag FROM {tag} t "
        "WHERE t.entry_id = {entry}.id ORDER BY t.id)",
        "sources": "SELECT json_group_array(json_array(chat_id, item_seq, source_entry_id)) "
        "FROM (SELECT s.chat_id, s.item_seq, s.source_entry_id FROM {source} s "
        "WHERE s.entry_id = {entry}.id ORDER BY s.position)",
    },
}
DETAILS = ("tag_list", "source_list")


def with_details(entries: QuerySet[Entry]) -> QuerySet[Entry]:
    """`entries` with their tags and sources (`DETAILS`), in the same query."""
    tables = {
        "entry": connection.ops.quote_name(Entry._meta.db_table),
        "tag": connection.ops.quote_name(EntryTag._meta.db_table),
        "source": connection.ops.quote_name(EntrySource._meta.db_table),
    }
    sql = _DETAILS_SQL[connection.vendor]
    # Only table names are put into the SQL; it takes no parameters.
    return entries.annotate(
        tag_list=RawSQL(sql["tags"].format(**tables), (), output_field=TextField()),  # noqa: S611
        source_list=RawSQL(  # noqa: S611
            sql["sources"].format(**tables), (), output_field=TextField()
        ),
    )


def with_tags_and_sources(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entry rows (`ENTRY_FIELDS` and `DETAILS`) with their `tags` and `sources` (in order)."""
    for row in rows:
        row["tags"] = _listed(row.pop("tag_list"))
        row["sources"] = [
            {
                "chat_id": chat_id,
                "item_seq": None if item_seq is None else int(item_seq),
                "source_entry_id": source_entry_id,
            }
            for chat_id, item_seq, source_entry_id in _listed(row.pop("source_list"))
        ]
    return rows


def _listed(value: list[Any] | str) -> list[Any]:
    """An array of `with_details`: a list on PostgreSQL, JSON text on SQLite."""
    return json.loads(value) if isinstance(value, str) else value


def opened_entries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sealed listing rows as entries: an entry no key opens is left out."""
    for row in rows:
        for name in ("pool_version", "rights"):
            row.pop(name, None)
    return with_tags_and_sources(readable_rows(Entry, rows))


def fitting(entries: Iterable[tuple[str, int]], limit: int) -> tuple[list[str], bool]:
    """The ids of `entries` (id, content length) up to the first that does not fit `limit`
    characters as context lines, and whether one did not fit (else they all did)."""
    chosen: list[str] = []
    used = 0
    for entry_id, length in entries:
        if used + length + CONTEXT_LINE_OVERHEAD > limit:
            return chosen, True
        used += length + CONTEXT_LINE_OVERHEAD
        chosen.append(entry_id)
    return chosen, False
