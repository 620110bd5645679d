"""[P4, P5] Removing the copies the memory bot's records hold, without decrypting anything.

Model calls and enrichments carry entry content and chat items in encrypted columns. Each
records, as plain metadata, what it carried: a model call its chat (`chat_id`) and the
entries whose content it held (`ModelCallEntry`), an enrichment the entries it was made from
(`EnrichmentEntry`). A purge blanks the requests and results of the calls that carried
what it removes and deletes the enrichments that used it, in the purge's own transaction;
deleting a chat's history blanks that chat's calls; retention blanks old calls.
Blanking keeps the rest of the row (usage, cost, purpose, status, ids) for billing and audit.

A purge can begin while a model call runs (they are long) and would miss the copy the call
records at its end: so a new copy is checked under the pool's read lock (`entries_kept`),
which a purge holds alone — an enrichment is stored only if every entry it was made from
still exists, and a call is blanked at once if one it carried is gone.

[F5] A pool learned through many turns holds thousands of calls that carried a chat's entries:
blanking them all under the pool's exclusive lock held every reader and writer of the bot for a
minute. So a purge removes the copies first, outside the lock, in batches of their own: the
copies of the entries that carry the tag at that moment and of what the tag names. Then, under
the lock and in one transaction, it deletes the entries and removes the copies made since (a
call or enrichment stored in between still names an entry that exists, so it is found). The
order never shows a purged entry: a copy goes before its entry, never after. A purge that fails
between the two leaves the entries in place and some of their copies already removed (blanked
calls keep their usage and cost); running it again finishes it.
"""

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from chats.models import Chat, Turn
from memory import services as memory
from memory.forgetting import pool_purge_in, purge_tag_check
from memory.lock import pool_read
from memory.models import Change, Entry, EntryTag
from memorybot.models import Enrichment, EnrichmentEntry, ModelCall, ModelCallEntry

BLANK_BATCH = 1000


@contextmanager
def entries_kept(*, pool_id: str, entry_ids: Collection[str]) -> Iterator[bool]:
    """A transaction under the pool's read lock, and whether every one of `entry_ids` still
    exists. A purge holds the lock alone: it has either committed or not yet begun."""
    wanted = set(entry_ids)
    with pool_read(pool_id):
        yield Entry.objects.filter(bot_id=pool_id, id__in=wanted).count() == len(wanted)


def model_call_store(call: ModelCall) -> bool:
    """Save a new call with the entries it carried (`call.carried`), then blank it if one of
    them was purged while the call ran: that purge could not find it. Checked after saving,
    under the read lock, so a purge that begins later finds the saved rows. False when it was
    blanked: its answer may carry what was purged, so it must not be used either."""
    carried = set(call.carried)
    with transaction.atomic():
        call.save(force_insert=True)
        ModelCallEntry.objects.bulk_create(
            [ModelCallEntry(call=call, entry_id=entry_id) for entry_id in carried]
        )
    if not carried:
        return True
    with entries_kept(pool_id=call.bot_id, entry_ids=carried) as kept:
        if not kept:
            model_calls_blank(ModelCall.objects.filter(pk=call.pk))
    return kept


def model_calls_blank(calls: QuerySet[ModelCall]) -> int:
    """Blank the request and result of `calls` not blanked yet, a batch per transaction (or
    within the caller's); the count blanked. Their entry rows go too: a blank call carries no
    content. `calls` must name each call once (subqueries, not joins): batches of repeats made
    a purge hold its lock for a minute."""
    pending = calls.filter(blanked_at__isnull=True).values_list("id", flat=True)
    blanked = 0
    while batch := list(pending[:BLANK_BATCH]):
        with transaction.atomic():
            ModelCallEntry.objects.filter(call_id__in=batch).delete()
            blanked += ModelCall.objects.filter(id__in=batch, blanked_at__isnull=True).update(
                request="", result="", blanked_at=timezone.now()
            )
    return blanked


def _calls_of_origin(*, pool_id: str, tag: str) -> Q:
    """The pool's calls whose requests carry what a purged tag names: a chat's calls
    carry its items, and so do the calls of a channel's chats, of an organization, and of
    every chat a person took a turn in (their input, the history, the learning items)."""
    kind, _, value = tag.partition(":")
    if kind == "chat":
        chats = Q(chat_id=value)
    elif kind == "channel":
        chats = Q(chat_id__in=Chat.objects.filter(channel_id=value).values("id"))
    elif kind == "org":
        chats = Q(organization_id=value)
    else:  # from:
        chats = Q(chat_id__in=Turn.objects.filter(person_id=value).values("chat_id"))
    return Q(bot_id=pool_id) & chats


def _copies_remove(
    *, pool_id: str, tag: str, entry_ids: Collection[str] | QuerySet[EntryTag, Any]
) -> None:
    """Blank the calls that carried `entry_ids` (ids, or a query of them) or what `tag`
    names, and delete the enrichments made from `entry_ids`."""
    carried = ModelCallEntry.objects.filter(entry_id__in=entry_ids).values("call_id")
    model_calls_blank(ModelCall.objects.filter(id__in=carried))
    model_calls_blank(ModelCall.objects.filter(_calls_of_origin(pool_id=pool_id, tag=tag)))
    used = EnrichmentEntry.objects.filter(entry_id__in=entry_ids).values("enrichment_id")
    # Ids only: the delete collector would otherwise load (and decrypt) the rows.
    Enrichment.objects.filter(id__in=used).only("id").delete()


def memory_purge(*, pool_id: str, tag: str) -> int:
    """Purge the pool's entries with `tag` and every readable copy of them
    and of what the tag names; the count of entries removed. The copies go first, outside the
    pool's lock; the entries, with the copies made since, in one transaction under it."""
    purge_tag_check(tag)
    tagged = EntryTag.objects.filter(bot_id=pool_id, tag=tag).values("entry_id")
    _copies_remove(pool_id=pool_id, tag=tag, entry_ids=tagged)
    with memory.pool_change(pool_id=pool_id, by=Change.By.PERSON, always=True) as change:
        removed = pool_purge_in(change, tag=tag)
        _copies_remove(pool_id=pool_id, tag=tag, entry_ids=removed)
    return len(removed)


def chat_model_calls_blank(*, chat_id: str) -> int:
    """Blank the chat's model calls (learning calls of its runs included): deleting
    its history removes their copies of its items."""
    return model_calls_blank(ModelCall.objects.filter(chat_id=chat_id))


def model_calls_prune(*, older_than_days: int) -> int:
    """Blank the requests and results of calls older than `older_than_days`."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    return model_calls_blank(ModelCall.objects.filter(created_at__lt=cutoff))
