"""[R7] Search's plan does not depend on planner statistics.

pytest's test database is never analyzed: its tables are as a new install has them. The
search statement must then still read the term index, and the pool's tag index, once each —
not once for every admitted entry or every candidate, which is what a plan that is right only
with statistics did (the cost of such a plan grows with what the reader may see and with the
pool, not with what matches). Only where the pool's rows of the query's terms far outnumber
what the reader's entries could hold does the statement look up each admitted entry's own,
by its form, not by the planner's choice.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.relevance import ENTRY_FIRST
from memory.search import search
from memory.terms import query_terms
from tests.conftest import World
from tests.memory.test_decryptions import pin
from tests.memory.test_search import reader

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's plans; SQLite plans by its own rules"
)


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def explained(statement: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}")
        (result,) = cursor.fetchone()
    return (json.loads(result) if isinstance(result, str) else result)[0]["Plan"]


def test_a_never_analyzed_pool_is_searched_from_the_query_terms(world: World) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM pg_stats WHERE tablename IN"
            " ('memory_entryterm', 'memory_entrytag', 'memory_entry')"
        )
        assert cursor.fetchone() == (0,)  # no planner statistics
    for index in range(40):
        pin(world, world.alice, f"Alice's note {index} about the weekly planning meeting.")
    pin(world, world.alice, "The wifi password of the Graz office is orchid-42.")
    pin(world, world.alice, "The wifi in Leipzig is slow on Fridays.")
    for index in range(20):
        pin(world, world.bob, f"Bob's wifi note {index}: the router is in the hall.")
    with CaptureQueriesContext(connection) as queries:
        found, _ = search(world.bot, reader(world, world.alice), "office wifi password", 10)
    assert [entry["content"] for entry in found][:1] == [
        "The wifi password of the Graz office is orchid-42."
    ]
    plan = explained(next(query["sql"] for query in queries if "memory_entryterm" in query["sql"]))
    scans = [
        node
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "memory_entryterm"
        or node.get("Index Name") == "tag_by_pool"
    ]
    assert scans
    # Each is read at most once, never once per entry; `Actual Loops` counts how often the node
    # ran (0 when the executor never needed it, e.g. the other arm of a BitmapOr).
    read = [
        (node["Node Type"], node.get("Index Name", node.get("Relation Name")), node["Actual Loops"])
        for node in scans
    ]
    assert read == [(kind, name, min(loops, 1)) for kind, name, loops in read]
    # Nor is what is summed over all the matches (the mean length, each term's count) summed
    # again for each match, as a plan without statistics did while those parts were inlined.
    totals = [
        (node["Node Type"], node["Actual Loops"])
        for node in plan_nodes(plan)
        if node["Node Type"] == "Aggregate"
    ]
    assert totals == [(kind, min(loops, 1)) for kind, loops in totals]


def test_a_pool_crowded_with_hidden_matches_is_searched_from_the_readers_entries(
    world: World,
) -> None:
    """[Q1] When the pool holds many more rows of the query's terms than the reader has
    entries (`ENTRY_FIRST` per entry and term), BM25 stops reading the pool's term rows at
    that bound and looks up each admitted entry's own, once: its cost follows what the reader
    may see, not how many hidden entries share a common word."""
    for index in range(60):
        pin(world, world.bob, f"Bob's wifi note {index}: the office router is in the hall.")
    for index in range(3):
        pin(world, world.alice, f"Alice's note {index} about the weekly planning meeting.")
    pin(world, world.alice, "The wifi password of the Graz office is orchid-42.")
    with CaptureQueriesContext(connection) as queries:
        found, _ = search(world.bot, reader(world, world.alice), "office wifi password", 10)
    assert [entry["content"] for entry in found] == [
        "The wifi password of the Graz office is orchid-42."
    ]
    plan = explained(next(query["sql"] for query in queries if "memory_entryterm" in query["sql"]))
    bound = int(ENTRY_FIRST * len(query_terms("office wifi password")) * 4)
    # The pool's term rows (120 of them hold a term) are read once, and cut at the bound...
    term_rows = [
        (node["Actual Loops"], node["Actual Rows"])
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "memory_entryterm"
    ]
    assert (1, bound + 1) in term_rows
    # ... then each of Alice's 4 entries' own term rows are looked up by the entry.
    by_entry = [
        node["Actual Loops"]
        for node in plan_nodes(plan)
        if node.get("Index Name") == "one_term_per_entry"
    ]
    assert by_entry == [4]
