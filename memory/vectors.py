"""Writing the meaning of entries: the worker computes each new entry's vector
(memory.meaning) after the entry is stored, and stores it encrypted.

An entry is found by its terms as soon as it is stored, and by its meaning once its vector
exists: a vector takes the model tens of milliseconds, so Remember does not wait for it.
`vectors_request` sends the pool's id once the writing transaction commits (the message names
the pool, never content); `vectors_fill` writes every missing vector of a pool, so a lost
message is made good by the pool's next write or by `manage.py reindex`. The actor and
`vectors_request` are in memory.tasks.
"""

from django.db.models import Exists, OuterRef

from memory.lock import pool_read, pool_write
from memory.meaning import meaning, vector_marked, vector_seal
from memory.models import Entry, EntryVector
from memory.when import only_asks
from openbot.fields import decrypt_all, encrypted_fields, readable_values, stored_batches

BATCH = 32


def vectors_fill(pool_id: str) -> int:
    """Write the vector of every entry of the pool that has none; how many were written.

    Contents are read and vectors computed outside the pool's lock; the vectors are written
    under it, for the entries that still exist then, so a purge in between leaves no vector of
    what it removed. An entry no key opens is passed over."""
    written = 0
    last = ""
    while True:
        with pool_read(pool_id):
            batch = list(
                Entry.objects.filter(bot_id=pool_id, id__gt=last)
                .exclude(Exists(EntryVector.objects.filter(entry_id=OuterRef("id"))))
                .order_by("id")
                .values_list("id", flat=True)[:BATCH]
            )
            rows = readable_values(Entry.objects.filter(id__in=batch), "id", "content")
        if not batch:
            return written
        last = batch[-1]
        sealed = {
            row["id"]: vector_seal(meaning(row["content"]), only_asks=only_asks(row["content"]))
            for row in rows
        }
        with pool_write(pool_id):
            kept = Entry.objects.filter(id__in=sealed).values_list("id", flat=True)
            written += len(
                EntryVector.objects.bulk_create(
                    [
                        EntryVector(entry_id=entry_id, bot_id=pool_id, vector=sealed[entry_id])
                        for entry_id in kept
                    ],
                    ignore_conflicts=True,
                )
            )


def vectors_rebuild() -> int:
    """For `manage.py reindex`: drop every vector no configured key opens (written under
    a key since dropped), mark those of entries that only ask where a vector written before
    the mark says otherwise, then write every missing vector of every pool; how many were
    written."""
    for batch in stored_batches(EntryVector, encrypted_fields(EntryVector), batch_size=1000):
        opened = decrypt_all([sealed for _, sealed in batch])
        texts = {entry_id: text for (entry_id, _), text in zip(batch, opened, strict=True)}
        lost = [entry_id for entry_id, text in texts.items() if text is None]
        EntryVector.objects.filter(entry_id__in=lost).delete()
        _marks_mend({entry_id: text for entry_id, text in texts.items() if text is not None})
    pools = Entry.objects.order_by().values_list("bot_id", flat=True).distinct()
    return sum(vectors_fill(pool_id) for pool_id in pools)


def _marks_mend(vectors: dict[str, str]) -> None:
    """Set the mark of an entry that only asks (`vector_seal`) on each of `vectors` (opened,
    by entry) where it says otherwise."""
    entries = readable_values(Entry.objects.filter(id__in=list(vectors)), "id", "content")
    for row in entries:
        marked = vector_marked(vectors[row["id"]], only_asks=only_asks(row["content"]))
        if marked != vectors[row["id"]]:
            EntryVector.objects.filter(entry_id=row["id"]).update(vector=marked)
