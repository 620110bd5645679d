"""[D2, P1, V10] ForgetMine agrees with single Forgets: for random pools (the access property
test's generator, through the real services) and a random person, ForgetMine leaves the pool
as a Forget of each entry they are behind and may see, one after another (what was drawn from
an entry before the entry), leaves it."""

from collections import defaultdict
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from hypothesis import event, given
from hypothesis import strategies as st

from memory.access import Reader, visible_entries
from memory.forgetting import entries_forget_mine, entry_forget
from memory.models import Entry, EntrySource, EntryTag, Evidence, Exclusion
from tests.memory.test_access_property import (  # noqa: F401 (`tenancy` is a fixture)
    Tenancy,
    example_count,
    random_pool,
    random_pools,
    tenancy,
)


def pool_state(pool_id: str) -> tuple[list[Any], list[Any]]:
    """Each entry's status and tags, and the exclusions: what a Forget changes."""
    entries = [
        (
            entry_id,
            status,
            sorted(EntryTag.objects.filter(entry_id=entry_id).values_list("tag", flat=True)),
        )
        for entry_id, status in Entry.objects.filter(bot_id=pool_id)
        .order_by("id")
        .values_list("id", "status")
    ]
    exclusions = sorted(
        Exclusion.objects.filter(entry__bot_id=pool_id).values_list("entry_id", "person_id")
    )
    return entries, exclusions


def behind(pool_id: str, reader: Reader) -> list[str]:
    """The entries the person may see that they are behind: tagged `from:` them, or pinned
    by them."""
    person_id = reader.person_id
    pinned = Evidence.objects.filter(entry_id=OuterRef("pk"), rule=f"person:{person_id}")
    return list(
        visible_entries(pool_id=pool_id, reader=reader.as_of_now(), active_only=False)
        .filter(Q(tag_rows__tag=f"from:{person_id}") | Q(Exists(pinned), layer=Entry.Layer.PINNED))
        .order_by("id")
        .distinct()
        .values_list("id", flat=True)
    )


def dependents_first(entry_ids: list[str]) -> list[str]:
    """`entry_ids`, each before the entries among them it names as sources: Forgetting a
    source first would hide what was drawn from it, and a single Forget of an entry no longer
    for the person is refused (ForgetMine takes every entry they may see when it begins)."""
    sources: defaultdict[str, set[str | None]] = defaultdict(set)
    for entry_id, source_id in EntrySource.objects.filter(
        entry_id__in=entry_ids, source_entry_id__in=entry_ids
    ).values_list("entry_id", "source_entry_id"):
        sources[entry_id].add(source_id)
    ordered: list[str] = []
    left = set(entry_ids)
    while left:
        named: set[str | None] = set().union(*(sources[entry_id] for entry_id in left))
        # Entries on a cycle are nobody's to see: they are not among `entry_ids`.
        ready = sorted(left - named) or sorted(left)
        ordered += ready
        left -= set(ready)
    return ordered


@random_pools(max(example_count() // 20, 2))
@given(data=st.data())
def test_forget_mine_does_what_single_forgets_do(
    tenancy: Tenancy,  # noqa: F811
    data: st.DataObject,
) -> None:
    with transaction.atomic():
        random_pool(tenancy, data)
        organization_id = data.draw(st.sampled_from(sorted(tenancy.staff)))
        person_id = data.draw(st.sampled_from(tenancy.staff[organization_id]))
        bot = tenancy.bot_of(organization_id)
        pool_id = tenancy.bot.id
        reader = Reader(organization_id=organization_id, person_id=person_id, bot=bot)
        with transaction.atomic():
            entries_forget_mine(pool_id=pool_id, reader=reader)
            mine = pool_state(pool_id)
            transaction.set_rollback(True)
        targets = dependents_first(behind(pool_id, reader))
        event(f"{min(len(targets), 3)}{'+' if len(targets) > 3 else ''} entries to forget")
        for entry_id in targets:
            entry_forget(pool_id=pool_id, reader=reader, entry_id=entry_id)
        assert pool_state(pool_id) == mine
        transaction.set_rollback(True)
