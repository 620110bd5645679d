"""[R7] Search's plan does not depend on planner statistics.

pytest's test database is never analyzed: its tables are as a new install has them. The
search statement must then still read the term index, and the pool's tag index, once each —
not once for every admitted entry or every candidate, which is what a plan that is right only
with statistics did (the cost of such a plan grows with what the reader may see and with the
pool, not with what matches). Only where the pool's rows of the query's terms far outnumber
what the reader's entries could hold does the statement look up each admitted entry's own,
by its form, not by the planner's choice.

The statement is bound on the server and prepared: each connection runs one generic plan
(settings.base), made without the values. That plan is the one explained here.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from memory.search import search
from openbot.compiled import Compiled
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


# The PostgreSQL type of each kind of parameter the search statement binds (a choice of a
# model's is a `str`; a `bool` is an `int`, so it comes first).
TYPES = ((bool, "boolean"), (str, "text"), (list, "text[]"), (float, "float8"), (int, "int8"))


def searched(query: str, world: World) -> tuple[list[dict[str, Any]], tuple[str, list[Any]]]:
    """The entries `search` finds for Alice, and BM25's statement (SQL, parameters) as sent."""
    sent: list[tuple[str, list[Any]]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        found, _ = search(world.bot, reader(world, world.alice), query, 10)
    return found, next(statement for statement in sent if "memory_entryterm" in statement[0])


def explained(statement: tuple[str, list[Any]]) -> dict[str, Any]:
    """The generic plan of `statement`, prepared as the server runs it, and run."""
    sql, params = statement
    types = ", ".join(
        next(name for kind, name in TYPES if isinstance(param, kind)) for param in params
    )
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE searched ({types}) AS {Compiled(sql, (*params,), ()).native_sql}")
        marks = ", ".join(["%s"] * len(params))
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE searched ({marks})", params)
        (result,) = cursor.fetchone()
        cursor.execute("DEALLOCATE searched")
    return (json.loads(result) if isinstance(result, str) else result)[0]["Plan"]


def test_a_never_analyzed_pool_is_searched_from_the_query_terms(world: World) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM pg_stats WHERE tablename IN"
            " ('memory_entryterm', 'memory_entrytag', 'memory_entry', 'memory_poolterm')"
        )
        assert cursor.fetchone() == (0,)  # no planner statistics
    for index in range(40):
        pin(world, world.alice, f"Alice's note {index} about the weekly planning meeting.")
    pin(world, world.alice, "The wifi password of the Graz office is orchid-42.")
    pin(world, world.alice, "The wifi in Leipzig is slow on Fridays.")
    for index in range(20):
        pin(world, world.bob, f"Bob's wifi note {index}: the router is in the hall.")
    found, statement = searched("office wifi password", world)
    assert [entry["content"] for entry in found][:1] == [
        "The wifi password of the Graz office is orchid-42."
    ]
    plan = explained(statement)
    scans = [
        node
        for node in plan_nodes(plan)
        if node.get("Relation Name") in {"memory_entryterm", "memory_poolterm"}
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


def crowded_plan(world: World) -> dict[str, Any]:
    """The plan of BM25's statement for Alice in a pool crowded with Bob's matches."""
    for index in range(60):
        pin(world, world.bob, f"Bob's wifi note {index}: the office router is in the hall.")
    for index in range(3):
        pin(world, world.alice, f"Alice's note {index} about the weekly planning meeting.")
    pin(world, world.alice, "The wifi password of the Graz office is orchid-42.")
    found, statement = searched("office wifi password", world)
    assert [entry["content"] for entry in found] == [
        "The wifi password of the Graz office is orchid-42."
    ]
    return explained(statement)


def by_entry(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's lookups of an entry's own term rows."""
    return [node for node in plan_nodes(plan) if node.get("Index Name") == "one_term_per_entry"]


def test_a_pool_crowded_with_hidden_matches_is_searched_from_the_readers_entries(
    world: World,
) -> None:
    """[Q1] When the pool holds many more rows of the query's terms than the reader has
    entries (`ENTRY_FIRST` per entry and term), which the pool's term counts tell, BM25 does
    not read the pool's term rows at all and looks up each admitted entry's own, once: its
    cost follows what the reader may see, not how many hidden entries share a common word."""
    plan = crowded_plan(world)
    # The pool's counts of the query's terms are read once...
    counts = [
        node["Actual Loops"]
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "memory_poolterm"
    ]
    assert counts == [1]
    # ... the pool's term rows (120 of them hold a term) never: the arm that reads them is
    # gated on the pool not being crowded, and nothing under the gate runs ...
    [gated] = [
        node
        for node in plan_nodes(plan)
        if node.get("One-Time Filter", "").startswith("(NOT ")
        and any(below.get("Relation Name") == "memory_entryterm" for below in plan_nodes(node))
    ]
    read = [
        below["Actual Loops"]
        for child in gated["Plans"]
        if child["Parent Relationship"] == "Outer"
        for below in plan_nodes(child)
    ]
    assert read and set(read) == {0}
    # ... and each of Alice's 4 entries' own term rows are looked up by the entry.
    assert [node["Actual Loops"] for node in by_entry(plan)] == [4]


def test_an_entrys_term_rows_are_one_range_in_a_large_never_analyzed_database(
    world: World,
) -> None:
    """In a database whose term index is large (here 20,000 rows of another pool), a plan
    without statistics descended the index once per term for each admitted entry, slower
    than the analyzed plan, which reads the entry's range once and tests the terms on it
    (docs/benchmarks.md, [R4]). The statement's form makes every plan do the latter: the
    terms are not in the lookup's index condition."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_entryterm (term, frequency, length, bot_id, entry_id)"
            " SELECT md5(n::text), 1, 8, %s, 'mem_other_' || (n / 8)"
            " FROM generate_series(1, 20000) n",
            [world.other_bot.id],
        )
    [lookup] = by_entry(crowded_plan(world))
    assert lookup["Actual Loops"] == 4
    assert "entry_id" in lookup["Index Cond"]
    assert "term" not in lookup["Index Cond"]
