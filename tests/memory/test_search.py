"""[R1, R2] Relevance search inside the access rule, over hashed terms.

BM25 is checked against a reference written here from Lucene's formula over the terms of a
small hand-made pool; the route against the base fixture people (no token, outsider, bad
input); the index against purge and a change of the index key.
"""

import math
from collections import Counter
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import Count
from pytest_django.fixtures import Settings

from memory.access import Reader
from memory.forgetting import pool_purge
from memory.lock import pool_read
from memory.models import Entry, EntryTerm, PoolTerm
from memory.relevance import (
    BM25_CAP,
    BM25_FULL,
    ENTRY_FIRST,
    LEXICAL_WEIGHT,
    questions_asked,
    ranked,
)
from memory.search import search
from memory.selectors import context
from memory.terms import query_terms, term_hash, text_terms
from openbot.errors import ApplicationError
from openbot.models import Bot
from tests.chats.test_turn_always_ends import damage
from tests.conftest import Actor, CryptoSpy, World, error_fields
from tests.memory.test_decryptions import group_fact, pin
from tests.memory.test_routes_memory import FIELDS


def reader(world: World, actor: Actor) -> Reader:
    return Reader.person(
        bot=world.bot, person_id=actor.person.id, organization_id=actor.organization.id
    )


def reference_scores(contents: dict[str, str], query: str, admitted: int) -> dict[str, float]:
    """Lucene's BM25 (k1 = 1.2, b = 0.75) over the matching entries, N = admitted entries."""
    terms = set(query_terms(query))
    counts = {entry_id: text_terms(content) for entry_id, content in contents.items()}
    matching = {entry_id: c for entry_id, c in counts.items() if terms & set(c)}
    avgdl = sum(sum(c.values()) for c in matching.values()) / len(matching)
    df = Counter(term for c in matching.values() for term in terms & set(c))
    scores = {}
    for entry_id, c in matching.items():
        length = sum(c.values())
        score = 0.0
        for term in terms & set(c):
            idf = math.log(1 + (admitted - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * c[term] / (c[term] + 1.2 * (1 - 0.75 + 0.75 * length / avgdl))
        scores[entry_id] = score
    return scores


def assert_counts_agree(bot: Bot) -> None:
    """The pool's term counts are its term rows counted: a term no entry holds has none."""
    held = EntryTerm.objects.filter(bot=bot).values("term").annotate(n=Count("*"))
    counted = PoolTerm.objects.filter(bot=bot).values_list("term", "entries")
    assert dict(counted) == {row["term"]: row["n"] for row in held}


def url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory/search"


def test_bm25_orders_a_hand_made_pool(world: World) -> None:
    contents = {
        "often": "Green tea, green tea and more green tea: Alice drinks it all day.",
        "once": "Alice drinks green tea in the morning before the stand-up meeting.",
        "other": "The team moved the weekly sync to Thursday afternoon.",
        "tea": "Tea ceremonies in Kyoto take about an hour.",
        "coffee": "Bob prefers coffee, black, no sugar.",
    }
    ids = {name: pin(world, world.alice, text).id for name, text in contents.items()}
    found, _ = search(world.bot, reader(world, world.alice), "green teas", 10)
    expected = reference_scores(
        {ids[name]: text for name, text in contents.items()}, "green teas", admitted=5
    )
    assert [entry["id"] for entry in found] == sorted(expected, key=lambda i: -expected[i])
    assert [entry["id"] for entry in found][:2] == [ids["often"], ids["once"]]
    assert found[0]["content"] == contents["often"]
    # BM25 itself (memory.relevance.ranked); search fuses it with meaning [R6], and these
    # entries have no vector yet: their score is BM25's part alone.
    with pool_read(world.bot.id):
        bm25 = ranked(
            pool_id=world.bot.id, reader=reader(world, world.alice), terms=query_terms("green teas")
        )
    assert [entry_id for entry_id, _ in bm25] == [entry["id"] for entry in found]
    for entry_id, score in bm25:
        assert score == pytest.approx(expected[entry_id], abs=1e-5)
    assert [entry["score"] for entry in found] == [
        pytest.approx(
            LEXICAL_WEIGHT * min(score, BM25_CAP) / BM25_CAP * min(1, score / BM25_FULL), abs=1e-6
        )
        for _, score in bm25
    ]


def test_bm25_in_a_pool_crowded_with_hidden_matches(world: World) -> None:
    """[R7, Q1] Where the pool holds far more rows of the query's terms than the reader's
    entries could (`ENTRY_FIRST`), BM25 reads the reader's own entries' term rows instead
    (test_search_plan shows the plan): the same scores, over what the reader may see alone."""
    for index in range(40):
        pin(world, world.bob, f"Bob's green tea note {index}: the kettle is in the hall.")
    contents = {
        "often": "Green tea, green tea and more green tea: Alice drinks it all day.",
        "once": "Alice drinks green tea in the morning before the stand-up meeting.",
        "tea": "Tea ceremonies in Kyoto take about an hour.",
        "coffee": "Alice's coffee is black, no sugar.",
    }
    ids = {name: pin(world, world.alice, text).id for name, text in contents.items()}
    terms = query_terms("green teas")
    assert len(terms) * 40 > ENTRY_FIRST * len(terms) * len(contents)  # crowded
    with pool_read(world.bot.id):
        bm25 = ranked(pool_id=world.bot.id, reader=reader(world, world.alice), terms=terms)
    expected = reference_scores(
        {ids[name]: text for name, text in contents.items()}, "green teas", admitted=4
    )
    assert [entry_id for entry_id, _ in bm25] == [ids["often"], ids["once"], ids["tea"]]
    for entry_id, score in bm25:
        assert score == pytest.approx(expected[entry_id], abs=1e-5)


def test_equal_scores_keep_memory_order(world: World) -> None:
    older = pin(world, world.alice, "The printer on floor two jams on Mondays.")
    newer = pin(world, world.alice, "The printer on floor two jams on Mondays.")
    found, _ = search(world.bot, reader(world, world.alice), "printer jams", 10)
    assert [entry["id"] for entry in found] == [newer.id, older.id]
    assert found[0]["score"] == found[1]["score"]


def test_normalization_folds_case_accents_and_german_inflection(world: World) -> None:
    entry = pin(world, world.alice, "Die Fahrräder stehen im Keller des Büros.")
    found, _ = search(world.bot, reader(world, world.alice), "FAHRRAD buero keller", 5)
    assert [item["id"] for item in found] == [entry.id]
    nothing, _ = search(world.bot, reader(world, world.alice), "the and der", 5)
    assert nothing == []


def test_a_query_of_two_questions_finds_what_answers_each(world: World) -> None:
    """[R5] Each question is ranked on its own: an entry that shares a few words with both is
    not put above the answers to either."""
    work = pin(world, world.alice, "Anna works at the harbour office.").id
    dog = pin(world, world.alice, "Rex is the name of Ben's dog.").id
    pin(world, world.alice, "Ben's dog visits Anna at work.")
    pin(world, world.alice, "Anna and Ben walk the dog past the office.")
    question = "Where does Anna work? What is the name of Ben's dog?"
    found, _ = search(world.bot, reader(world, world.alice), question, 2)
    assert {entry["id"] for entry in found} == {work, dog}
    # Together, the questions' words rank the entry that shares some of each first.
    together, _ = search(world.bot, reader(world, world.alice), question.replace("?", ""), 2)
    assert {entry["id"] for entry in together} != {work, dog}


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        (
            "Where does Anna work? And what is her dog called?",
            ["Where does Anna work?", "And what is her dog called?"],
        ),
        # From the third question on, one part: no question of the query is lost.
        (
            "Who? Where does Anna work? Is Rex a dog? Who walks him? When did Ben call?",
            ["Where does Anna work?", "Is Rex a dog?", "Who walks him? When did Ben call?"],
        ),
        # One question among other sentences, or greetings: the query is scored whole.
        ("Hi! What is the name of Ben's dog?", None),
        ("I had a long day. What should I cook?", None),
        ("Was hat sie z. B. über den 1. FC Köln gesagt?", None),
    ],
)
def test_the_questions_a_query_asks(query: str, parts: list[str] | None) -> None:
    assert questions_asked(query) == (parts or [query])


def test_search_shows_only_what_the_reader_may_see(world: World) -> None:
    mine = pin(world, world.alice, "The launch code word is pineapple.")
    pin(world, world.bob, "My code word is pineapple too.")
    group = group_fact(world, world.carol, "The channel code word is pineapple.")
    found, _ = search(world.bot, reader(world, world.alice), "pineapple", 10)
    assert {entry["id"] for entry in found} == {mine.id, group.id}
    bobs, _ = search(world.bot, reader(world, world.bob), "launch pineapple", 10)
    assert mine.id not in {entry["id"] for entry in bobs}
    assert len(bobs) == 1


def test_search_decrypts_only_what_it_returns(world: World, crypto: CryptoSpy) -> None:
    for n in range(6):
        pin(world, world.alice, f"Deploy note {n}: the deploy runs at night.")
    pin(world, world.alice, "Lunch is at noon.")
    crypto.arm()
    found, _ = search(world.bot, reader(world, world.alice), "deploy", 2)
    assert len(found) == 2
    assert sorted(crypto.decrypted) == sorted(entry["content"] for entry in found)
    assert crypto.encrypted == []


def test_context_with_a_query_follows_relevance_and_stops_at_the_first_overflow(
    world: World, crypto: CryptoSpy
) -> None:
    best = pin(world, world.alice, "budget budget budget review")
    long = pin(world, world.alice, "budget budget review " + "x" * 60)
    short = pin(world, world.alice, "budget review planning notes")
    pin(world, world.alice, "unrelated and newest")
    alice = reader(world, world.alice)
    assert context(world.bot, alice, 4000, query="budget").entry_ids == [best.id, long.id, short.id]
    crypto.arm()
    found = context(world.bot, alice, 60, query="budget")
    # `long` does not fit in what is left of 60 characters: the walk stops there, `short` is
    # not used although it would fit, and nothing after the overflow is decrypted [S1].
    assert found.entry_ids == [best.id]
    assert crypto.decrypted == ["budget budget budget review"]
    # [S1] No query: memory order, exactly as before (the newest pinned entry first).
    assert context(world.bot, alice, 4000).entry_ids[0] not in {best.id, long.id, short.id}


def test_purge_removes_the_index_rows(world: World) -> None:
    """[P4, Q1] Purge deletes the entry's term rows and counts them out of the pool's term
    counts: a term only the purged entry held has no count left."""
    entry = group_fact(world, world.carol, "The offsite is in Lisbon.")
    kept = pin(world, world.alice, "Lisbon has good trams.")
    pin(world, world.alice, "Lisbon again, for a count of two.")
    assert EntryTerm.objects.filter(entry_id=entry.id).exists()
    assert PoolTerm.objects.get(bot=world.bot, term=term_hash("lisbon")).entries == 3
    assert_counts_agree(world.bot)
    pool_purge(pool_id=world.bot.id, tag=f"from:{world.carol.person.id}")
    assert not EntryTerm.objects.filter(entry_id=entry.id).exists()
    assert EntryTerm.objects.filter(entry_id=kept.id).exists()
    assert PoolTerm.objects.get(bot=world.bot, term=term_hash("lisbon")).entries == 2
    [offsite] = text_terms("offsite")
    assert not PoolTerm.objects.filter(term=term_hash(offsite)).exists()
    assert_counts_agree(world.bot)


def test_reindex_rekeys_the_index_after_a_key_change(world: World, settings: Settings) -> None:
    entry = pin(world, world.alice, "The wifi password changes every quarter.")
    alice = reader(world, world.alice)
    old = set(EntryTerm.objects.filter(entry_id=entry.id).values_list("term", flat=True))
    assert term_hash("wifi") in old
    settings.OPENBOT_INDEX_KEY = "a-new-index-key-of-at-least-32-characters"
    assert term_hash("wifi") not in old
    # Until the index is re-keyed, the old rows match no query.
    assert search(world.bot, alice, "wifi", 5)[0] == []
    out, err = StringIO(), StringIO()
    call_command("reindex", "--batch-size", "1", stdout=out, stderr=err)
    assert '"reindexed": 1' in out.getvalue() and '"unreadable": []' in out.getvalue()
    assert "reindex: 1 of 1 entries" in err.getvalue()
    assert [item["id"] for item in search(world.bot, alice, "wifi", 5)[0]] == [entry.id]
    new = set(EntryTerm.objects.filter(entry_id=entry.id).values_list("term", flat=True))
    assert new.isdisjoint(old) and len(new) == len(old)
    # The old key's term counts went with its rows.
    assert_counts_agree(world.bot)


def test_reindex_passes_over_an_entry_no_key_opens(world: World) -> None:
    """[R2] An entry alone in its batch whose content no key opens is reported, its rows kept;
    the batch after it is re-keyed."""
    broken = pin(world, world.alice, "The wifi password changes every quarter.")
    kept = pin(world, world.alice, "The printer jams on Mondays.")
    damage(Entry, broken.id, "content")
    out = StringIO()
    call_command("reindex", "--batch-size", "1", stdout=out, stderr=StringIO())
    assert f'"unreadable": ["{broken.id}"]' in out.getvalue()
    assert EntryTerm.objects.filter(entry_id=broken.id).exists()
    assert EntryTerm.objects.filter(entry_id=kept.id).exists()
    assert_counts_agree(world.bot)


# --- The route [R1, A9] ----------------------------------------------------------------------


def get(actor: Actor, world: World, query: dict[str, Any]) -> Any:
    return actor.client().get(url(world), query)


def test_route_returns_entries_with_a_score(world: World) -> None:
    entry = pin(world, world.alice, "Invoices go out on the first Monday.")
    response = get(world.alice, world, {"q": "invoice monday", "limit": 3})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == {"entries", "version"}
    [found] = body["entries"]
    assert found["id"] == entry.id and found["content"] == "Invoices go out on the first Monday."
    assert set(found) == FIELDS | {"score"}
    assert found["score"] > 0
    assert get(world.bob, world, {"q": "invoice monday"}).json()["entries"] == []


def test_route_needs_a_token_and_read_on_the_bot(world: World, anon: Any) -> None:
    assert anon.get(url(world), {"q": "x"}).status_code == 401
    assert get(world.dave, world, {"q": "x"}).status_code == 404


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": " ".join(f"word{n}" for n in range(1000))}, "q"),
        ({"q": "x" * 1001}, "q"),
        ({"q": "tea", "limit": "100000000000"}, "limit"),
        ({"q": "tea", "limit": "0"}, "limit"),
        ({"q": "tea", "limit": "ten"}, "limit"),
    ],
)
def test_route_bad_input_names_the_field(world: World, query: dict[str, str], field: str) -> None:
    response = get(world.alice, world, query)
    assert response.status_code == 400, response.json()
    assert set(error_fields(response)) == {field}


def test_python_api_refuses_bad_input(world: World) -> None:
    alice = reader(world, world.alice)
    with pytest.raises(ApplicationError) as empty:
        search(world.bot, alice, "", 5)
    assert empty.value.fields == {"q": ["must not be empty"]}
    with pytest.raises(ApplicationError) as huge:
        search(world.bot, alice, "tea", 10**9)
    assert set(huge.value.fields or {}) == {"limit"}
