"""[R1] Search a pool: the active entries a reader may see that match a query, most relevant
first (memory.relevance), as entry rows with a `score`. Only the entries returned are
decrypted."""

from typing import Any

from memory.access import Reader
from memory.lock import pool_read
from memory.models import Entry
from memory.relevance import hybrid_ranked
from memory.rows import DETAILS, ENTRY_FIELDS, with_details, with_tags_and_sources
from memory.selectors import pool_version
from memory.terms import query_words
from openbot.errors import invalid
from openbot.fields import readable_values
from openbot.models import Bot

MAX_QUERY_CHARACTERS = 1000
MAX_QUERY_WORDS = 64
MAX_RESULTS = 100


def search_check(query: str, limit: int) -> None:
    """Bad input is an error naming the field (`q`, `limit`)."""
    if not query.strip():
        raise invalid("q", "must not be empty")
    if len(query) > MAX_QUERY_CHARACTERS or query_words(query) > MAX_QUERY_WORDS:
        raise invalid("q", f"at most {MAX_QUERY_CHARACTERS} characters and {MAX_QUERY_WORDS} words")
    if not 1 <= limit <= MAX_RESULTS:
        raise invalid("limit", f"must be an integer from 1 to {MAX_RESULTS}")


def search(bot: Bot, reader: Reader, query: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """At most `limit` active entries `reader` may see that match `query`, most relevant
    first, as rows (`EntryOutput`) each with its `score`, and the pool's version."""
    search_check(query, limit)
    pool_id = bot.pool_bot_id
    with pool_read(pool_id):
        reader = reader.as_of_now()
        found = hybrid_ranked(pool_id=pool_id, reader=reader, query=query, limit=limit)
        scores = dict(found)
        # An entry no key opens is left out.
        rows = {
            row["id"]: row
            for row in readable_values(
                with_details(Entry.objects.filter(id__in=scores)), *ENTRY_FIELDS, *DETAILS
            )
        }
        found_rows = with_tags_and_sources(
            [rows[entry_id] for entry_id in scores if entry_id in rows]
        )
        version = pool_version(pool_id)
    return [row | {"score": scores[row["id"]]} for row in found_rows], version
