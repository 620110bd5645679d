"""Derived access data, recomputed on write so reads never walk graphs (SPEC appendix).

For every entry the pool keeps `Closure` rows (the entry and every existing entry reachable
through its source references) and `Entry.sound`: false when a reachable source is missing,
not active or lacks evidence, or a cycle is reachable [V4](d, e), [V6]. A change to an entry
refreshes it and everything that depends on it, in the same transaction.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from memory.models import Closure, Entry, EntrySource, Evidence


@dataclass
class _Node:
    layer: str
    status: str
    source_entries: list[str] = field(default_factory=list)
    source_items: set[tuple[str | None, int | None]] = field(default_factory=set)
    evidence_items: set[tuple[str | None, int | None]] = field(default_factory=set)
    evidence_count: int = 0

    def carries_evidence(self) -> bool:
        """[V4](d) A pinned entry its own rule; a fact one rule per source item."""
        if self.layer == Entry.Layer.PINNED:
            return self.evidence_count > 0
        if self.layer == Entry.Layer.FACT:
            return bool(self.source_items) and self.source_items <= self.evidence_items
        return bool(self.source_entries)


def _load(pool_id: str, ids: set[str]) -> dict[str, _Node]:
    nodes = {
        entry_id: _Node(layer=layer, status=status)
        for entry_id, layer, status in Entry.objects.filter(pool_id=pool_id, id__in=ids)
        .values_list("id", "layer", "status")
        .iterator()
    }
    for entry_id, source_entry_id, chat_id, item_seq in (
        EntrySource.objects.filter(entry_id__in=nodes)
        .order_by("entry_id", "position")
        .values_list("entry_id", "source_entry_id", "chat_id", "item_seq")
    ):
        if source_entry_id is not None:
            nodes[entry_id].source_entries.append(source_entry_id)
        else:
            nodes[entry_id].source_items.add((chat_id, item_seq))
    for entry_id, chat_id, item_seq in Evidence.objects.filter(entry_id__in=nodes).values_list(
        "entry_id", "chat_id", "item_seq"
    ):
        nodes[entry_id].evidence_count += 1
        nodes[entry_id].evidence_items.add((chat_id, item_seq))
    return nodes


def _reachable(start: str, nodes: dict[str, _Node]) -> tuple[set[str], bool, bool]:
    """(existing entries reachable from `start` incl. itself, a source is missing, a cycle)."""
    seen: set[str] = set()
    on_path: set[str] = set()
    missing = cycle = False
    stack: list[tuple[str, int]] = [(start, 0)]
    seen.add(start)
    on_path.add(start)
    while stack:
        entry_id, index = stack.pop()
        sources = nodes[entry_id].source_entries
        if index < len(sources):
            stack.append((entry_id, index + 1))
            source = sources[index]
            if source not in nodes:
                missing = True
            elif source in on_path:
                cycle = True
            elif source not in seen:
                seen.add(source)
                on_path.add(source)
                stack.append((source, 0))
        else:
            on_path.discard(entry_id)
    return seen, missing, cycle


def dependents(ids: Iterable[str]) -> set[str]:
    """Entries that depend on any of `ids`, or name one of them as a source (even missing)."""
    ids = set(ids)
    naming = set(
        EntrySource.objects.filter(source_entry_id__in=ids).values_list("entry_id", flat=True)
    )
    base = ids | naming
    return naming | set(
        Closure.objects.filter(ancestor_id__in=base).values_list("entry_id", flat=True)
    )


def refresh(*, pool_id: str, changed_ids: Iterable[str]) -> None:
    """Recompute closure and soundness of `changed_ids` and of everything depending on them."""
    changed = set(changed_ids)
    affected = changed | dependents(changed)
    nodes: dict[str, _Node] = {}
    looked_up: set[str] = set()
    frontier = set(affected)
    while frontier:
        looked_up |= frontier
        loaded = _load(pool_id, frontier)
        nodes.update(loaded)
        referenced = {source for node in loaded.values() for source in node.source_entries}
        frontier = referenced - looked_up
    affected &= set(nodes)
    closure_rows: list[Closure] = []
    sound_ids: list[str] = []
    for entry_id in affected:
        reached, missing, cycle = _reachable(entry_id, nodes)
        closure_rows += [Closure(entry_id=entry_id, ancestor_id=other) for other in reached]
        dependencies_ok = all(
            nodes[other].status == Entry.Status.ACTIVE and nodes[other].carries_evidence()
            for other in reached - {entry_id}
        )
        if not (missing or cycle) and dependencies_ok and nodes[entry_id].carries_evidence():
            sound_ids.append(entry_id)
    Closure.objects.filter(entry_id__in=affected).delete()
    Closure.objects.bulk_create(closure_rows, batch_size=2000)
    Entry.objects.filter(id__in=sound_ids).update(sound=True)
    Entry.objects.filter(id__in=affected - set(sound_ids)).update(sound=False)
