"""[R7] On SQLite, the embedded default, a read's plan does not depend on statistics either.

SQLite plans a database that was never analyzed (as a new install has it, and as pytest's is)
by its own rules. An entry's admitting `for:` tag must then be looked up by the entry, not
among the pool's tag rows: that plan read every tag row of the pool for every entry listed,
and an export of 10,000 entries took minutes instead of seconds.
"""

from typing import Any

import pytest
from django.db import connection

from memory.access import every_visible_entry, visible_entries
from tests.conftest import World
from tests.memory.test_decryptions import pin, reader

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's plans; PostgreSQL's are test_search_plan's"
)


@pytest.mark.parametrize("way", [visible_entries, every_visible_entry])
@pytest.mark.parametrize("active_only", [False, True])
def test_an_entrys_admitting_tag_is_looked_up_by_the_entry(
    world: World, way: Any, active_only: bool
) -> None:
    for index in range(5):
        pin(world, world.alice, f"Alice's note {index}.")
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")
        assert cursor.fetchone() == (0,)  # never analyzed
    entries = way(pool_id=world.bot.id, reader=reader(world, world.alice), active_only=active_only)
    sql, params = entries.values_list("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = [row[-1] for row in cursor.fetchall()]
    tag_indexes = {"sqlite_autoindex_memory_entrytag_1", "tag_by_entry_kind", "tag_by_pool"}
    tag_reads = [line for line in plan if any(f" {index} " in line for index in tag_indexes)]
    # One lookup of the admitting tag by (entry, tag); the pool's tag rows are read, if at
    # all, by (pool, tag) for a set, never by the pool alone.
    assert any("memory_entrytag_1 (entry_id=? AND tag=?)" in line for line in tag_reads), plan
    assert not any("(bot_id=?)" in line for line in plan if "entrytag" in line), plan
    assert [entry.id for entry in entries] != []
