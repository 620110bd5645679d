"""[R1, V4] Search never returns an entry the reader may not see.

The random pools of the access property test (built through the real services, with the test's
own reference model of [V4]); for every reader, a random query made of the pool's own words.
What `search` returns must be active entries the reference lets the reader see: every one of
them that holds a query term, and — in the examples whose entries have vectors [R6] — those
close to the query in meaning, nothing else.

Examples: `OPENBOT_SEARCH_EXAMPLES` (default 500 on PostgreSQL, 100 on SQLite).
"""

import os
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import event, given
from hypothesis import strategies as st

from memory.meaning import meaning
from memory.models import Entry
from memory.relevance import MIN_SIMILARITY
from memory.search import search
from memory.terms import query_terms, text_terms
from memory.vectors import vectors_fill
from tests.memory.test_access_property import Tenancy, make_tenancy, random_pool, random_pools

EXAMPLES_ENV = "OPENBOT_SEARCH_EXAMPLES"


@pytest.fixture
def tenancy(db: Any) -> Tenancy:
    return make_tenancy()


def example_count() -> int:
    raw = os.environ.get(EXAMPLES_ENV)
    if raw:
        return int(raw)
    return 500 if connection.vendor == "postgresql" else 100


@random_pools(example_count())
@given(data=st.data())
def test_search_returns_only_what_the_reader_may_see(tenancy: Tenancy, data: st.DataObject) -> None:
    with transaction.atomic():
        model = random_pool(tenancy, data)
        # [R6] In one example of four the entries have their vectors: search fuses meaning
        # with terms (the hybrid ranker); else it finds by terms alone.
        by_meaning = data.draw(st.integers(0, 3)) == 0
        if by_meaning:
            vectors_fill(tenancy.bot.id)
        contents = dict(Entry.objects.filter(bot=tenancy.bot).values_list("id", "content"))
        every_word = sorted({word for content in contents.values() for word in content.split()})
        hits = 0
        for ref_reader, reader in tenancy.readers():
            if not every_word:
                break
            allowed = model.visible(ref_reader, active_only=True)
            # Mostly words of entries the reader may see, so that queries hit; else any word.
            own = sorted({word for entry_id in allowed for word in contents[entry_id].split()})
            words = own if own and data.draw(st.integers(0, 3)) > 0 else every_word
            query = " ".join(data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=3)))
            bot = tenancy.bot_of(ref_reader.organization)
            found = {entry["id"] for entry in search(bot, reader, query, 100)[0]}
            invisible = found - allowed
            assert invisible == set(), f"{ref_reader} {query!r}: shown but hidden by [V4]"
            terms = set(query_terms(query))
            matching = {
                entry_id for entry_id in allowed if terms & set(text_terms(contents[entry_id]))
            }
            assert matching <= found, f"{ref_reader} {query!r}: missed {matching - found}"
            if by_meaning:
                # The others are close in meaning (int8 vectors: within a rounding error).
                asked = meaning(query)
                for entry_id in found - matching:
                    assert meaning(contents[entry_id]) @ asked >= MIN_SIMILARITY - 0.01
            else:
                assert found == matching
            hits += len(found)
        event(f"search hits over all readers: {min(hits, 6)}{'+' if hits >= 6 else ''}")
        transaction.set_rollback(True)
