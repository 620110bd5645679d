"""Taking memory back: a person's Forget of one entry or of everything they are behind
(ForgetMine), and an operator's purge by tag. Each is one change of the
pool (`memory.services.pool_change`): one transaction under the write lock, one version.
"""

from dataclasses import dataclass
from functools import partial

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from memory import graph
from memory.access import Reader, visible_entries, visible_ids
from memory.models import Change, ChangeEntry, Entry, EntryTag, Evidence, Exclusion
from memory.selectors import pool_version
from memory.services import PoolChange, entry_set_status_in, pool_change, tag_kind
from openbot.errors import ApplicationError, Conflict, invalid
from openbot.idempotency import UNCLAIMED, Claim

PURGE_KINDS = ("from", "chat", "org", "channel")


def entry_forget(*, pool_id: str, reader: Reader, entry_id: str, claim: Claim = UNCLAIMED) -> None:
    """[P1] Take back the reader's part: retract if they are the only person behind it;
    recorded for the request's `Idempotency-Key` (`claim`) in the same transaction."""
    person_id = reader.person_id
    with pool_change(pool_id=pool_id, by=Change.By.PERSON) as change:
        reader = reader.as_of_now()  # rights as of the lock
        if person_id is None or entry_id not in visible_ids(
            pool_id=pool_id, reader=reader, ids=[entry_id], active_only=False
        ):
            raise Conflict(f"entry {entry_id} is not for you", code="not_for_you")
        _forget_in(change, person_id=person_id, people=_people_behind([entry_id]))
        claim.made()


@dataclass(frozen=True)
class Forgotten:
    """What a ForgetMine did: the entries retracted, those the person was excluded from,
    and the pool's version after it (unchanged when there was nothing to forget)."""

    retracted: int
    excluded: int
    version: int

    def resource(self) -> str:
        """The answer as an `Idempotency-Key` record keeps it: counts, no content."""
        return f"{self.retracted} {self.excluded} {self.version}"

    @classmethod
    def of_resource(cls, resource: str) -> "Forgotten":
        retracted, excluded, version = (int(number) for number in resource.split())
        return cls(retracted=retracted, excluded=excluded, version=version)


def entries_forget_mine(*, pool_id: str, reader: Reader, claim: Claim = UNCLAIMED) -> Forgotten:
    """[D2] A Forget of every entry the reader's person is behind and may see now, in one
    change: one version, one log record. Recorded for the request's
    `Idempotency-Key` (`claim`) in the same transaction."""
    person_id = reader.person_id
    if person_id is None:
        raise ApplicationError("only a person forgets their entries")
    # The outer transaction holds the pool's lock past `pool_change`, which takes the version
    # as it ends, so that the answer with its version is recorded in the change's transaction.
    with transaction.atomic():
        with pool_change(pool_id=pool_id, by=Change.By.PERSON) as change:
            reader = reader.as_of_now()  # rights as of the lock
            # The access rule says what they may see (the history view, as a single Forget);
            # among it, the candidates are the entries tagged `from:` them and pinned ones
            # (their own): `_people_behind` decides who is behind each.
            tagged = EntryTag.objects.filter(entry_id=OuterRef("pk"), tag=f"from:{person_id}")
            candidates = list(
                visible_entries(pool_id=pool_id, reader=reader, active_only=False)
                .filter(Q(Exists(tagged)) | Q(layer=Entry.Layer.PINNED))
                .values_list("id", flat=True)
            )
            people = {
                entry_id: behind
                for entry_id, behind in _people_behind(candidates).items()
                if person_id in behind
            }
            retracted, excluded = _forget_in(change, person_id=person_id, people=people)
        version = change.version if change.version is not None else pool_version(pool_id)
        forgotten = Forgotten(retracted=retracted, excluded=excluded, version=version)
        claim.made(forgotten.resource())
    return forgotten


def _people_behind(entry_ids: list[str]) -> dict[str, set[str]]:
    """The people behind each entry: its `from:` people, and the author of a pinned one."""
    people: dict[str, set[str]] = {entry_id: set() for entry_id in entry_ids}
    for batch in graph.id_batches(entry_ids):
        tags = EntryTag.objects.filter(entry_id__in=batch, kind="from")
        for entry_id, tag in tags.values_list("entry_id", "tag"):
            people[entry_id].add(tag.removeprefix("from:"))
        authors = Evidence.objects.filter(entry_id__in=batch, entry__layer=Entry.Layer.PINNED)
        for entry_id, rule in authors.values_list("entry_id", "rule"):
            people[entry_id].add(rule.removeprefix("person:"))
    return people


def _forget_in(
    change: PoolChange, *, person_id: str, people: dict[str, set[str]]
) -> tuple[int, int]:
    """Take back the person's part of each entry of `people` (entries they may see, with
    the people behind each, `_people_behind`): an entry they alone are behind is retracted;
    from any other, `from:P` and `for:person:P` go and P is excluded privately, so it stays for
    the others. Returns how many were retracted and how many P was excluded from."""
    # Retract only when P is the only person behind it; an entry nobody is behind (an
    # import without `from:`) stays for the others, P is excluded.
    retract = [entry_id for entry_id, behind in people.items() if behind == {person_id}]
    exclude = [entry_id for entry_id, behind in people.items() if behind != {person_id}]
    for entry_id in retract:
        entry_set_status_in(change, entry_id=entry_id, status=Entry.Status.RETRACTED)
    for batch in graph.id_batches(exclude):
        EntryTag.objects.filter(
            entry_id__in=batch, tag__in=[f"from:{person_id}", f"for:person:{person_id}"]
        ).delete()
        Exclusion.objects.bulk_create(
            [Exclusion(entry_id=entry_id, person_id=person_id) for entry_id in batch],
            ignore_conflicts=True,
        )
        Entry.objects.filter(id__in=batch).update(updated_at=change.at)
    for entry_id in exclude:
        change.record(entry_id, {"op": "forget"})
    return len(retract), len(exclude)


def purge_tag_check(tag: str) -> None:
    """Only a from:, chat:, org: or channel: tag with a value can be purged."""
    if tag_kind(tag) not in PURGE_KINDS or tag.endswith(":"):
        raise invalid("tag", "must be a from:, chat:, org: or channel: tag")


def pool_purge_in(change: PoolChange, *, tag: str) -> set[str]:
    """[A4, P2] Delete every entry with `tag` without reading content, with their evidence
    and log payloads; observations derived from them carry the tag and go too. Returns the
    ids removed, so the caller can remove the copies other apps hold."""
    purge_tag_check(tag)
    pool_id = change.pool_id
    entry_ids = set(
        EntryTag.objects.filter(bot_id=pool_id, tag=tag).values_list("entry_id", flat=True)
    )
    remaining_dependents = graph.dependents(entry_ids) - entry_ids
    ordered = sorted(entry_ids)
    for batch in graph.id_batches(ordered):
        Change.objects.filter(bot_id=pool_id, entry_rows__entry_id__in=batch).update(payload="")
        # Entry ids are unique across pools: the log's index rows are found by id alone.
        ChangeEntry.objects.filter(entry_id__in=batch).delete()
    graph.entries_delete(pool_id=pool_id, entry_ids=ordered)
    transaction.on_commit(partial(graph.closure_discard, ordered))
    change.structural |= remaining_dependents
    change.operations.append({"op": "purge", "tag": tag, "removed": len(entry_ids)})
    return entry_ids


def pool_purge(*, pool_id: str, tag: str) -> int:
    """Purge the pool's entries with `tag`; the count removed. Memory's part only:
    `memorybot.purge.memory_purge` (the route and the command) also removes the copies the
    memory bot's records hold."""
    with pool_change(pool_id=pool_id, by=Change.By.PERSON, always=True) as change:
        return len(pool_purge_in(change, tag=tag))
