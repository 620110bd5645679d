"""[R1] Relevance inside the access rule: BM25 over the hashed terms, in one SQL query.

The candidates are the entries the one access rule (`memory.access.visible_among`) lets the
reader see for active use and that hold a query term, a subquery of the scoring statement:
found from the reader's admitting tag rows and the query's term rows, both read from their
indexes once. The cost grows with the matching entries the reader is admitted to, not with
the pool, whether or not the tables have planner statistics [R7]. No content is decrypted
here; for meaning, the vectors of the entries the reader may see are (`hybrid_ranked`).

Scoring is Lucene's BM25 (`BM25Similarity`, k1 = 1.2, b = 0.75):
`idf · tf / (tf + k1 · (1 − b + b · dl / avgdl))` with `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`
summed over the query's terms. Lucene takes N, df and avgdl over the whole index; here they are
taken over what the reader may see — N over the entries whose `for:` tag admits them,
df and avgdl over the matching entries they may see — so a score says nothing about entries
hidden from the reader. Equal scores (rounded to 6 places) keep memory order.
"""

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from memory.access import Reader, visible_among, visible_entries
from memory.meaning import meaning, vectors_open
from memory.models import Entry, EntryTag, EntryTerm, EntryVector, PoolTerm
from memory.shapes import shape_of
from memory.terms import query_terms, term_hash
from memory.when import asks, time_named
from openbot.clock import now_ms
from openbot.compiled import compiled, cursor
from openbot.fields import readable_rows, sealed_values

K1 = 1.2
B = 0.75
# Fusing BM25 with meaning (`hybrid_ranked`), and the cosine from which an entry is
# close in meaning: chosen on the R5 conversations (docs/benchmarks.md, "R5 Recall on
# conversations"). BM25's first CANDIDATES (at least) are fused.
LEXICAL_WEIGHT = 0.35
BM25_CAP = 12.0
# BM25 below this counts in proportion to itself as well: a match on one word that half the
# entries hold (idf ln 2, a BM25 near 0.7) adds little (chosen on the R5 conversations).
BM25_FULL = 3.0
MIN_SIMILARITY = 0.35
CANDIDATES = 100
# Above this many of the pool's rows of the query's terms per admitted entry and term, BM25
# reads the admitted entries' own term rows instead (`ranked`): a lookup by the entry costs
# about this many rows read in the term index (measured on the R4 pools, docs/benchmarks.md).
ENTRY_FIRST = 1.5
# An entry that only asks seldom answers a question: its score is weighed down by this.
ASKING_WEIGHT = 0.8
# What an entry said within the time a query names gains, over a score of at most 1 [R8].
IN_TIME_WEIGHT = 0.5
# A query that asks several questions: each is ranked on its own.
MAX_PARTS = 3
QUESTION_END = re.compile(r"(?<=\?)\s+")
# Question vectors are computed, and the vectors a search scores decrypted, here, while the
# database answers.
# One thread per CPU this process may use (every CPU where the platform cannot tell).
_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
_THREADS = ThreadPoolExecutor(max_workers=_CPUS or 1, thread_name_prefix="meaning")


def ranked(
    *, pool_id: str, reader: Reader, terms: list[str], limit: int | None = None
) -> list[tuple[str, float]]:
    """(id, score) of the active entries `reader` may see that hold one of
    `terms`, most relevant first, at most `limit`; read it under the pool's lock.

    One statement whose plan is fixed by its form, so that its cost does not hang on the plan
    PostgreSQL picks with planner statistics or without [R7]. It reads the reader's admitting
    `for:` tag rows once (`admitting`), and the query's term rows one of two ways, whichever
    reads fewer: from the pool's term index, once, unless the pool holds more than
    `ENTRY_FIRST` rows of the query's terms per admitted entry and term (`crowded`, told by
    the pool's term counts, not by reading the rows) — rows mostly of entries hidden from the
    reader, in a large pool with common words — in which case each admitted entry's own term
    rows are looked up by the entry; so the cost follows what the reader may see, not the pool
    [Q1]. Either way the same rows are found. Then: the entries that hold a term and are
    admitted (`candidates`, by grouping, not by joining); those the one access rule lets the
    reader see for active use (`visible_among`, compiled once per reader shape,
    checked for the candidates only); their term rows, marked by grouping again; then scored.
    """
    if not terms or not reader.for_tags:
        return []
    hashes = [term_hash(term) for term in terms]
    shape = shape_of(pool_id=pool_id, reader=reader)

    def build() -> QuerySet[Any, Any]:
        # `candidates` is the statement's own CTE below.
        candidates = RawSQL("SELECT c.entry_id FROM candidates c", ())  # noqa: S611
        return visible_among(pool_id=shape.pool_id, reader=shape.reader, ids=candidates).values(
            "id"
        )

    seen = compiled(("searchable", shape.key), build)
    terms_table = connection.ops.quote_name(EntryTerm._meta.db_table)
    counts_table = connection.ops.quote_name(PoolTerm._meta.db_table)
    tags_table = connection.ops.quote_name(EntryTag._meta.db_table)
    entry_table = connection.ops.quote_name(Entry._meta.db_table)
    # On PostgreSQL each list is bound as one array: the statement's text is then the same
    # for every query of a reader shape, and is prepared once per connection (`cursor`).
    postgresql = connection.vendor == "postgresql"
    tag_in, tag_values = _one_of(reader.for_tags, array=postgresql)
    term_in, term_values = _one_of(hashes, array=postgresql)
    # An admitted entry's own term rows, by the entry (`one_term_per_entry`): on PostgreSQL
    # a lateral subquery that is not pulled up (OFFSET 0) runs for each admitted entry, by
    # construction; SQLite's joins are loops, the outer one here the admitted entries. On
    # PostgreSQL each entry's rows are read as one range and the terms tested on them
    # (`|| ''` keeps the term out of the index condition): a plan without statistics would
    # otherwise descend the index once per term and entry, slower in a large pool [R7].
    if postgresql:
        by_entry = f"""(SELECT DISTINCT entry_id FROM admitting) a CROSS JOIN LATERAL (
                SELECT t.entry_id, t.term, t.frequency, t.length FROM {terms_table} t
                WHERE t.entry_id = a.entry_id AND t.term || '' {term_in} OFFSET 0
            ) o"""
    else:
        by_entry = f"""(SELECT DISTINCT entry_id FROM admitting) a JOIN {terms_table} o
                ON o.entry_id = a.entry_id AND o.term {term_in}"""
    cap = "CAST(%s * COUNT(*) AS INTEGER)"
    # A row of `found` without a term is an admitting tag row (an entry may have several).
    # N: the entries whose `for:`
    # tag admits the reader. K1 and B are literals and `1.0 *` keeps the arithmetic numeric
    # (exact) on PostgreSQL, real on SQLite.
    sql = f"""
        WITH admitting AS MATERIALIZED (
            SELECT a.entry_id FROM {tags_table} a WHERE a.bot_id = %s AND a.tag {tag_in}
        ),
        crowded AS MATERIALIZED (
            SELECT COALESCE(SUM(c.entries), 0) > (SELECT {cap} FROM admitting) AS yes
            FROM {counts_table} c WHERE c.bot_id = %s AND c.term {term_in}
        ),
        found AS MATERIALIZED (
            SELECT t.entry_id, t.term, t.frequency, t.length FROM {terms_table} t
            WHERE t.bot_id = %s AND t.term {term_in} AND NOT (SELECT yes FROM crowded)
            UNION ALL
            SELECT o.entry_id, o.term, o.frequency, o.length FROM {by_entry}
            WHERE (SELECT yes FROM crowded)
            UNION ALL
            SELECT a.entry_id, NULL, 0, 0 FROM admitting a
        ),
        candidates AS MATERIALIZED (
            SELECT f.entry_id FROM found f GROUP BY f.entry_id
            HAVING COUNT(f.term) > 0 AND COUNT(*) > COUNT(f.term)
        ),
        seen AS MATERIALIZED ({seen.sql}),
        marked AS (
            SELECT m.entry_id, m.term, m.frequency, m.length,
                   COUNT(*) OVER w - COUNT(m.term) OVER w AS visible
            FROM (
                SELECT f.entry_id, f.term, f.frequency, f.length FROM found f
                WHERE f.term IS NOT NULL
                UNION ALL
                SELECT s.id, NULL, 0, 0 FROM seen s
            ) m
            WINDOW w AS (PARTITION BY m.entry_id)
        ),
        hits AS (
            SELECT entry_id, term, frequency, length FROM marked
            WHERE term IS NOT NULL AND visible > 0
        ),
        admitted AS MATERIALIZED (SELECT COUNT(DISTINCT entry_id) AS n FROM admitting),
        idf AS MATERIALIZED (
            SELECT df.term, LN(1 + (a.n - df.n + 0.5) / (df.n + 0.5)) AS idf
            FROM (SELECT term, COUNT(*) AS n FROM hits GROUP BY term) df CROSS JOIN admitted a
        ),
        docs AS (SELECT entry_id, MAX(length) AS length FROM hits GROUP BY entry_id),
        stats AS MATERIALIZED (SELECT AVG(1.0 * length) AS avgdl FROM docs),
        scored AS (
            SELECT h.entry_id,
                   ROUND(SUM(
                       i.idf
                       * (1.0 * h.frequency)
                       / (h.frequency + {K1} * (1 - {B} + {B} * h.length / s.avgdl))
                   ), 6) AS score
            FROM hits h JOIN idf i ON i.term = h.term CROSS JOIN stats s
            GROUP BY h.entry_id
        )
        SELECT e.id, sc.score
        FROM scored sc JOIN {entry_table} e ON e.id = sc.entry_id
        ORDER BY sc.score DESC, e.rank, e.updated_at DESC, e.id
    """
    cap_per_entry = ENTRY_FIRST * len(hashes)
    params = [
        *(pool_id, *tag_values),
        *(cap_per_entry, pool_id, *term_values),
        *(pool_id, *term_values),
        *term_values,
        *seen.params_for(shape.values),
    ]
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with cursor() as rows:
        rows.execute(sql, params)
        return [(entry_id, float(score)) for entry_id, score in rows.fetchall()]


def _one_of(values: list[str], *, array: bool) -> tuple[str, list[Any]]:
    """SQL that what precedes it is one of `values`, and its parameters: with `array`, one
    array."""
    if array:
        return "= ANY(%s)", [values]
    return f"IN ({', '.join(['%s'] * len(values))})", values


def _question(query: str) -> Future[np.ndarray]:
    """The vector of `query`, computed in a thread of the process's own while the database
    answers (numpy and the database driver both let go of the interpreter meanwhile)."""
    return _THREADS.submit(meaning, query)


class _Vectors(NamedTuple):
    entry_ids: list[str]
    matrix: np.ndarray
    # The entries that only ask (`vector_seal`).
    asking: frozenset[str]


def _sealed_vectors(*, pool_id: str, reader: Reader) -> list[dict[str, Any]]:
    """The vectors, as stored, of every active entry `reader` may see that has a vector, read
    in one statement compiled once per reader shape (`_vectors_opened` decrypts them); the
    entries' own rows are not read again for them."""
    shape = shape_of(pool_id=pool_id, reader=reader)

    def build() -> QuerySet[Any, Any]:
        seen = visible_entries(pool_id=shape.pool_id, reader=shape.reader, active_only=True)
        vectors = EntryVector.objects.filter(entry_id__in=seen.values("id"))
        return sealed_values(vectors, "entry", "vector")

    return compiled(("vectors", shape.key), build).rows(shape.values)


def _vectors_opened(rows: list[dict[str, Any]]) -> _Vectors:
    """The vectors of `_sealed_vectors`, decrypted; one no key opens is passed over."""
    opened = readable_rows(EntryVector, rows)
    entry_ids = [row["entry"] for row in opened]
    matrix, only_asking = vectors_open([row["vector"] for row in opened])
    asking = frozenset(
        entry_id for entry_id, asks_only in zip(entry_ids, only_asking, strict=True) if asks_only
    )
    return _Vectors(
        entry_ids=entry_ids,
        matrix=matrix,
        asking=asking,
    )


def _similarities(found: _Vectors, questions: list[Future[np.ndarray]]) -> dict[str, list[float]]:
    """Each entry's cosines to each of the `questions`' vectors."""
    if not found.entry_ids:
        for question in questions:
            question.cancel()
        return {}
    asked = np.stack([question.result() for question in questions], axis=1)
    cosines = np.round(found.matrix @ asked, 6)
    return dict(zip(found.entry_ids, cosines.tolist(), strict=True))


def meaning_ranked(*, pool_id: str, reader: Reader, query: str) -> list[tuple[str, float]]:
    """(id, cosine) of the active entries `reader` may see that are close
    to `query` in meaning (cosine ≥ `MIN_SIMILARITY`), closest first; read it under the
    pool's lock."""
    question = _question(query)
    found = _similarities(
        _vectors_opened(_sealed_vectors(pool_id=pool_id, reader=reader)), [question]
    )
    close = [(entry_id, cosines[0]) for entry_id, cosines in found.items()]
    return sorted((row for row in close if row[1] >= MIN_SIMILARITY), key=lambda row: -row[1])


def hybrid_ranked(
    *, pool_id: str, reader: Reader, query: str, limit: int | None = None
) -> list[tuple[str, float]]:
    """[R6] (id, score) of the active entries `reader` may see that hold a
    term of `query` (BM25, `ranked`) or are close to it in meaning (`meaning_ranked`), best
    first, at most `limit`; read it under the pool's lock.

    The score is a convex combination: `LEXICAL_WEIGHT · lexical + (1 − LEXICAL_WEIGHT) ·
    cosine` (cosine 0 for what has no vector yet), where `lexical` is BM25 capped at
    `BM25_CAP` on a scale of 0 to 1, and weighed down below `BM25_FULL`. BM25 is taken on its
    own scale, not normalized by the best match: a query whose only match is a word half the
    entries hold (a name) then adds almost nothing, where rank fusion (RRF) would have put
    those entries first and lost every paraphrase on the R5 conversations. Equal scores keep
    BM25's order (memory order among its equals), then the meaning order.

    A query that asks several questions ("Where does Anna work? And what is her dog
    called?") is scored question by question (from the `MAX_PARTS`-th on, taken as one), and
    an entry's score is its best share of a question's best score, so that what
    answers each comes first [R5]; what else the query says is then not matched. A query that
    asks one thing or none is scored whole.

    A question that names a time ("last week", "in May 2026": `memory.when`) is matched
    without the words that name it, and adds `IN_TIME_WEIGHT` to each entry found that was
    said within it [R8], read in one more statement over the entries found.

    An entry that only asks ("How is your family doing?", `memory.when.only_asks`) seldom
    answers a question: its score is weighed down by `ASKING_WEIGHT`. One that says again,
    word for word, what one ranked above it said comes after all the others
    (`_repeats_last`)."""
    named = time_named(query, now_ms()) if asks(query) else None
    parts = questions_asked(query if named is None else named.rest)
    questions = [_question(part) for part in parts]
    # The question's vector is computed while the database answers both statements, and the
    # vectors are decrypted while it answers BM25's, each in a search thread (ONNX Runtime
    # lets go of the interpreter while it computes).
    sealed = _sealed_vectors(pool_id=pool_id, reader=reader)
    opening = _THREADS.submit(_vectors_opened, sealed)
    lexical = [
        ranked(
            pool_id=pool_id,
            reader=reader,
            terms=query_terms(part),
            limit=None if limit is None else max(limit, CANDIDATES),
        )
        for part in parts
    ]
    opened = opening.result()
    cosines = _similarities(opened, questions)
    fused = [_fused(found, cosines, part, opened.asking) for part, found in enumerate(lexical)]
    scores = fused[0] if len(fused) == 1 else _best_shares(fused)
    if named is not None and scores:
        start, end = named.window
        for entry_id in Entry.objects.filter(
            id__in=list(scores), said_at__gte=start, said_at__lt=end
        ).values_list("id", flat=True):
            scores[entry_id] += IN_TIME_WEIGHT
    rounded = {entry_id: round(score, 6) for entry_id, score in scores.items()}
    order = sorted(rounded, key=lambda entry_id: -rounded[entry_id])
    best = _repeats_last(order, opened, limit)
    return [(entry_id, rounded[entry_id]) for entry_id in best]


def _repeats_last(order: list[str], vectors: _Vectors, limit: int | None) -> list[str]:
    """The first `limit` of `order`, where an entry whose vector is the same as that of one
    before it (the same words said again: "How is your family doing?") comes after all the
    others: a line said again tells the reader nothing new, and what else matches takes its
    place."""
    rows = dict(zip(vectors.entry_ids, vectors.matrix, strict=True))
    first: list[str] = []
    repeats: list[str] = []
    said: set[bytes] = set()
    for entry_id in order:
        vector = rows.get(entry_id)
        key = None if vector is None else vector.tobytes()
        if key in said:
            repeats.append(entry_id)
            continue
        first.append(entry_id)
        if key is not None:
            said.add(key)
        if len(first) == limit:
            break
    return [*first, *repeats][:limit]


def questions_asked(text: str) -> list[str]:
    """The questions a query asks, if more than one, at most `MAX_PARTS`; else the query."""
    pieces = QUESTION_END.split(text)
    # One piece (most queries) is the query: its terms are not read twice.
    asked = [part for part in pieces if asks(part) and query_terms(part)] if pieces[1:] else []
    if len(asked) < 2:
        return [text]
    head, rest = asked[: MAX_PARTS - 1], asked[MAX_PARTS - 1 :]
    return [*head, " ".join(rest)] if rest else head


def _fused(
    lexical: list[tuple[str, float]],
    cosines: dict[str, list[float]],
    part: int,
    asking: frozenset[str],
) -> dict[str, float]:
    """The hybrid score of each entry one part of a query finds (see `hybrid_ranked`), in
    BM25's order, then the meaning order."""
    scores = {entry_id: LEXICAL_WEIGHT * _lexical_share(bm25) for entry_id, bm25 in lexical}
    for entry_id, cosine in sorted(cosines.items(), key=lambda item: -item[1][part]):
        if entry_id in scores or cosine[part] >= MIN_SIMILARITY:
            scores[entry_id] = scores.get(entry_id, 0.0) + (1 - LEXICAL_WEIGHT) * cosine[part]
    return {
        entry_id: score * ASKING_WEIGHT if entry_id in asking else score
        for entry_id, score in scores.items()
    }


def _lexical_share(bm25: float) -> float:
    """BM25's part of a hybrid score, 0 to 1 (see `hybrid_ranked`)."""
    return min(bm25, BM25_CAP) / BM25_CAP * min(1.0, bm25 / BM25_FULL)


def _best_shares(fused: list[dict[str, float]]) -> dict[str, float]:
    """Each entry's best share of a part's best score."""
    shares: dict[str, float] = {}
    for scores in fused:
        top = max(scores.values(), default=0.0)
        if top <= 0:
            continue
        for entry_id, score in scores.items():
            shares[entry_id] = max(shares.get(entry_id, score / top), score / top)
    return shares


# A server caller's query (an enrichment's input) is cut to this many words, not refused.
CONTEXT_QUERY_WORDS = 64


def relevant_in_order(*, pool_id: str, reader: Reader, query: str) -> list[tuple[str, int]]:
    """(id, content length) of the active entries `reader` may see that match `query` by terms
    or meaning, most relevant first, for `context`: its first `CONTEXT_QUERY_WORDS`
    words count."""
    text = " ".join(query.split()[:CONTEXT_QUERY_WORDS])
    found = [entry_id for entry_id, _ in hybrid_ranked(pool_id=pool_id, reader=reader, query=text)]
    # Read here, for what was found only: search itself does not need them.
    lengths = dict(Entry.objects.filter(id__in=found).values_list("id", "content_length"))
    return [(entry_id, lengths[entry_id]) for entry_id in found]
