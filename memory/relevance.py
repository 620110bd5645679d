"""[R1] Relevance inside the access rule: BM25 over the hashed terms [R2], in one SQL query.

The candidates are the entries the one access rule (`memory.access.visible_entries`) lets the
reader see for active use and that hold a query term, a subquery of the scoring statement:
driven by the reader's admitting tag rows and the query's term rows, both read from their
indexes. The cost grows with the matching entries the reader is admitted to, not with the
pool. Nothing is decrypted here.

Scoring is Lucene's BM25 (`BM25Similarity`, k1 = 1.2, b = 0.75):
`idf · tf / (tf + k1 · (1 − b + b · dl / avgdl))` with `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`
summed over the query's terms. Lucene takes N, df and avgdl over the whole index; here they are
taken over what the reader may see — N over the entries whose `for:` tag admits them,
df and avgdl over the matching entries they may see — so a score says nothing about entries
hidden from the reader. Equal scores (rounded to 6 places) keep memory order [E6].
"""

from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from memory.access import Reader, visible_entries
from memory.compiled import shape_of
from memory.models import Entry, EntryTag, EntryTerm
from memory.terms import query_terms, term_hash
from openbot.compiled import compiled

K1 = 1.2
B = 0.75


def ranked(
    *, pool_id: str, reader: Reader, terms: list[str], limit: int | None = None
) -> list[tuple[str, float, int]]:
    """(id, score, content length) of the active entries `reader` may see that hold one of
    `terms`, most relevant first, at most `limit`; read it under the pool's lock [L1].

    One statement: the entries admitted by a `for:` tag that hold a query term (a
    materialized CTE, so that PostgreSQL starts from them), those of them the one access rule
    lets the reader see for active use [V6] (`visible_entries`, compiled once per reader shape
    [Q4]), then their term rows scored.
    """
    if not terms or not reader.for_tags:
        return []
    hashes = [term_hash(term) for term in terms]
    shape = shape_of(pool_id=pool_id, reader=reader)

    def build() -> QuerySet[Any, Any]:
        # `candidates` is the statement's own CTE below: the entries admitted by a `for:`
        # tag that hold a term, few, so the access rule checks only them.
        candidates = RawSQL("SELECT c.entry_id FROM candidates c", ())  # noqa: S611
        return (
            visible_entries(pool_id=shape.pool_id, reader=shape.reader, active_only=True)
            .filter(id__in=candidates)
            .order_by()
            .values("id")
        )

    seen = compiled(("searchable", shape.key), build)
    terms_table = connection.ops.quote_name(EntryTerm._meta.db_table)
    tags_table = connection.ops.quote_name(EntryTag._meta.db_table)
    entry_table = connection.ops.quote_name(Entry._meta.db_table)
    term_marks = ", ".join(["%s"] * len(hashes))
    tag_marks = ", ".join(["%s"] * len(reader.for_tags))
    # N: the entries whose `for:` tag admits the reader. K1 and B are literals and `1.0 *`
    # keeps the arithmetic numeric (exact) on PostgreSQL, real on SQLite.
    sql = f"""
        WITH candidates AS MATERIALIZED (
            SELECT DISTINCT t.entry_id FROM {terms_table} t
            WHERE t.bot_id = %s AND t.term IN ({term_marks}) AND t.entry_id IN (
                SELECT a.entry_id FROM {tags_table} a WHERE a.bot_id = %s AND a.tag IN ({tag_marks})
            )
        ),
        hits AS (
            SELECT t.entry_id, t.term, t.frequency, t.length
            FROM {terms_table} t
            WHERE t.bot_id = %s AND t.term IN ({term_marks}) AND t.entry_id IN ({seen.sql})
        ),
        admitted AS MATERIALIZED (
            SELECT COUNT(DISTINCT a.entry_id) AS n FROM {tags_table} a
            WHERE a.bot_id = %s AND a.tag IN ({tag_marks})
        ),
        df AS (SELECT term, COUNT(*) AS n FROM hits GROUP BY term),
        docs AS (SELECT entry_id, MAX(length) AS length FROM hits GROUP BY entry_id),
        stats AS (SELECT AVG(1.0 * length) AS avgdl FROM docs),
        scored AS (
            SELECT h.entry_id,
                   ROUND(SUM(
                       LN(1 + (a.n - df.n + 0.5) / (df.n + 0.5))
                       * (1.0 * h.frequency)
                       / (h.frequency + {K1} * (1 - {B} + {B} * h.length / s.avgdl))
                   ), 6) AS score
            FROM hits h JOIN df ON df.term = h.term CROSS JOIN stats s CROSS JOIN admitted a
            GROUP BY h.entry_id
        )
        SELECT e.id, sc.score, e.content_length
        FROM scored sc JOIN {entry_table} e ON e.id = sc.entry_id
        ORDER BY sc.score DESC, e.rank, e.updated_at DESC, e.id
    """
    params: list[Any] = [pool_id, *hashes, pool_id, *reader.for_tags]
    params += [pool_id, *hashes, *seen.params_for(shape.values), pool_id, *reader.for_tags]
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(entry_id, float(score), length) for entry_id, score, length in cursor.fetchall()]


# A server caller's query (an enrichment's input) is cut to this many words, not refused.
CONTEXT_QUERY_WORDS = 64


def relevant_in_order(*, pool_id: str, reader: Reader, query: str) -> list[tuple[str, int]]:
    """(id, content length) of the active entries `reader` may see that match `query`, most
    relevant first, for `context` [R1]: its first `CONTEXT_QUERY_WORDS` words count."""
    words = query.split()[:CONTEXT_QUERY_WORDS]
    terms = query_terms(" ".join(words))
    return [
        (entry_id, length)
        for entry_id, _, length in ranked(pool_id=pool_id, reader=reader, terms=terms)
    ]
