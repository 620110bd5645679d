"""[R6] Search by meaning: vectors from the real model (all-MiniLM-L6-v2 from its PyPI wheel),
written by the worker after the entry, encrypted like content, scored only over the entries the
reader may see, fused with BM25, removed with the content, rotated and rebuilt.

A question here shares no stem with the entry that answers it ("new dog" / "adopted a puppy"),
so only its meaning can find it.
"""

from typing import Any

import dramatiq
import numpy as np
import pytest
from cryptography.fernet import Fernet
from django.db import connection
from threadpoolctl import threadpool_info

from conversations.erase import person_erase
from memory.forgetting import pool_purge
from memory.meaning import DIMENSIONS, _model, meaning, vector_seal, vectors_open
from memory.models import Entry, EntryVector
from memory.search import search
from memory.selectors import context
from memory.tasks import MEANING_QUEUE
from memory.terms import query_terms
from memory.vectors import vectors_fill
from openbot.fields import decrypt
from tests.conftest import CryptoSpy, World
from tests.factories import ChatFactory
from tests.memory.minilm_reference import Reference
from tests.memory.test_commands import K1, K2, run
from tests.memory.test_decryptions import group_fact, pin
from tests.memory.test_search import reader
from tests.memorybot.learning_world import stub_broker

PUPPY = "We adopted a puppy last week, we named him Rocky."
QUESTION = "What is the dog called?"


def found_ids(world: World, actor: Any, query: str, limit: int = 5) -> list[str]:
    return [entry["id"] for entry in search(world.bot, reader(world, actor), query, limit)[0]]


def test_the_model_computes_on_one_thread() -> None:
    """A question's vector is a few small products: ONNX Runtime's and BLAS's own threads
    only contend with the server's requests for the cores."""
    meaning(QUESTION)
    options = _model().session.get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {1}


SENTENCES = [
    QUESTION,
    PUPPY,
    "Our dog Rocky loves the long walks by the river.",
    "Rocky is the name of the band playing on Friday.",
    "How is your family doing?",
    "When did Anna start her pottery class?",
    "Anna: I signed up for a pottery class in March, my hands were covered in clay for hours.",
    "kubernetes cluster upgrade window",
    "Ja",
    # Longer than the model reads (cut at MAX_TOKENS word pieces).
    " ".join(["The quarterly report is due on Friday and nobody has started it yet."] * 12),
]


def test_the_int8_graph_keeps_the_meaning_of_the_float_model() -> None:
    """[R6] The graph's int8 products give each text nearly the vector of the model's own
    float32 forward pass (`minilm_reference`), and each two texts nearly its cosine (what the
    recall figures of docs/benchmarks.md rest on)."""
    reference = Reference()
    quick = np.stack([meaning(text) for text in SENTENCES])
    exact = np.stack([reference.vector(text) for text in SENTENCES])
    assert np.allclose(np.linalg.norm(quick, axis=1), 1.0, atol=1e-5)
    assert min(np.sum(quick * exact, axis=1)) > 0.98
    quick_cosines, exact_cosines = quick @ quick.T, exact @ exact.T
    # Measured: at most 0.036, between two texts far apart in meaning ("Ja", the long one).
    assert np.abs(quick_cosines - exact_cosines).max() < 0.05


def test_the_question_shares_no_term_with_its_answer() -> None:
    assert set(query_terms(QUESTION)) & set(query_terms(PUPPY)) == set()


def test_an_entry_is_found_by_meaning_once_its_vector_exists(world: World) -> None:
    puppy = pin(world, world.alice, PUPPY)
    pin(world, world.alice, "The quarterly report is due on Friday.")
    # Found by its terms at once; by its meaning only once the worker wrote its vector.
    assert found_ids(world, world.alice, "puppy") == [puppy.id]
    assert found_ids(world, world.alice, QUESTION) == []
    assert vectors_fill(world.bot.id) == 2
    assert found_ids(world, world.alice, QUESTION) == [puppy.id]
    assert vectors_fill(world.bot.id) == 0  # idempotent
    # [R6] context(query=) and `recall: relevant` use the same fused order.
    assert context(world.bot, reader(world, world.alice), 4000, query=QUESTION).entry_ids == [
        puppy.id
    ]


def test_a_vector_close_to_no_entry_finds_nothing(world: World) -> None:
    pin(world, world.alice, PUPPY)
    vectors_fill(world.bot.id)
    assert found_ids(world, world.alice, "kubernetes cluster upgrade window") == []


def test_fusion_puts_what_both_rankers_find_first(world: World) -> None:
    both = pin(world, world.alice, "Our dog Rocky loves the long walks by the river.")
    pin(world, world.alice, "Rocky is the name of the band playing on Friday.")
    meant = pin(world, world.alice, "We adopted a beagle puppy last week.")
    vectors_fill(world.bot.id)
    found = search(world.bot, reader(world, world.alice), "our dog", 5)[0]
    # `both` holds the term and is close in meaning; `meant` is only close in meaning; the
    # band shares neither.
    assert [entry["id"] for entry in found] == [both.id, meant.id]
    assert found[0]["score"] > found[1]["score"]


def test_a_query_of_two_questions_finds_what_answers_each_by_meaning(world: World) -> None:
    """[R5] Each question is ranked by its own vector: an entry close to the two together is
    not put above the answers to either."""
    dog = pin(world, world.alice, PUPPY).id
    job = pin(world, world.alice, "My sister teaches maths at the primary school.").id
    pin(world, world.alice, "My sister's school keeps a puppy that the children walk.")
    pin(world, world.alice, "The quarterly report is due on Friday.")
    vectors_fill(world.bot.id)
    question = "What is the dog called? Where does my sister work?"
    assert set(found_ids(world, world.alice, question, 2)) == {dog, job}
    # As one question, its vector is closest to the entry that mixes both.
    assert set(found_ids(world, world.alice, question.replace("?", ""), 2)) != {dog, job}


def test_a_line_said_again_comes_after_what_else_matches(world: World) -> None:
    """[R6] A repeat, word for word, of an entry ranked above it tells the reader nothing new:
    it comes after all the others, and what else matches takes its place."""
    first = pin(world, world.alice, PUPPY).id
    again = pin(world, world.alice, PUPPY).id
    walks = pin(world, world.alice, "Our dog Rocky loves the long walks by the river.").id
    vectors_fill(world.bot.id)
    found = found_ids(world, world.alice, QUESTION, 3)
    assert set(found[:2]) in ({first, walks}, {again, walks})
    assert found[2] in {first, again}
    assert set(found_ids(world, world.alice, QUESTION, 2)) != {first, again}
    # context(query=) ranks every entry found (no limit): the repeat comes last there too.
    used = context(world.bot, reader(world, world.alice), 4000, query=QUESTION).entry_ids
    assert used == found


def test_an_entry_that_asks_comes_after_one_that_answers(world: World) -> None:
    """[R6] A stored question seldom answers one: it is weighed down (`ASKING_WEIGHT`), so the
    answer comes first although the question is closer to the query in meaning."""
    answer = pin(world, world.alice, PUPPY).id
    asked = pin(world, world.alice, "How old is the puppy now?").id
    vectors_fill(world.bot.id)
    assert found_ids(world, world.alice, QUESTION) == [answer, asked]


def test_meaning_never_shows_what_the_reader_may_not_see(world: World) -> None:
    """[V4, Q1] Only the vectors of entries the reader may see are scored."""
    mine = pin(world, world.alice, PUPPY)
    bobs = pin(world, world.bob, "Bob adopted a puppy too, a beagle called Max.")
    group = group_fact(world, world.carol, "The channel's office dog is a puppy named Biscuit.")
    vectors_fill(world.bot.id)
    assert set(found_ids(world, world.alice, "a new dog", 10)) == {mine.id, group.id}
    assert set(found_ids(world, world.bob, "a new dog", 10)) == {bobs.id}
    assert found_ids(world, world.dave, "a new dog", 10) == []


def test_search_decrypts_what_it_returns_and_the_vectors_it_scores(
    world: World, crypto: CryptoSpy
) -> None:
    for n in range(4):
        pin(world, world.alice, f"Deploy note {n}: the deploy runs at night.")
    pin(world, world.bob, "Bob's deploy note: nobody deploys on Fridays.")
    vectors_fill(world.bot.id)
    crypto.arm()
    found, _ = search(world.bot, reader(world, world.alice), "deploy", 2)
    assert len(found) == 2
    sealed_length = len(vector_seal(meaning("deploy"), only_asks=False))
    vectors = [text for text in crypto.decrypted if len(text) == sealed_length]
    contents = [text for text in crypto.decrypted if len(text) != sealed_length]
    assert sorted(contents) == sorted(entry["content"] for entry in found)
    # Besides them, one vector per entry Alice sees (4), none of Bob's.
    assert len(vectors) == 4
    assert crypto.encrypted == []


def test_a_vector_is_stored_encrypted(world: World) -> None:
    entry = pin(world, world.alice, PUPPY)
    vectors_fill(world.bot.id)
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT "vector" FROM "memory_entryvector" WHERE "entry_id" = %s', [entry.id]
        )
        (stored,) = cursor.fetchone()
    # A Fernet token under the configured key, which opens to the sealed vector.
    plain = vector_seal(meaning(PUPPY), only_asks=False)
    assert stored.startswith("gAAAAA") and plain not in stored
    assert decrypt(stored) == plain
    (opened,) = EntryVector.objects.filter(entry_id=entry.id).values_list("vector", flat=True)
    (vector,), (asks,) = vectors_open([opened])
    assert not asks
    assert vector.shape == (DIMENSIONS,)
    assert float(vector @ meaning(PUPPY)) > 0.99  # int8 keeps the meaning
    assert str(EntryVector.objects.get(entry_id=entry.id)) == f"vector of {entry.id}"


def test_purge_and_erasure_leave_no_vector_of_what_they_removed(world: World) -> None:
    purged = group_fact(world, world.carol, "Carol's cat Miso hates the vacuum cleaner.")
    erased = pin(world, world.bob, "Bob adopted a puppy too, a beagle called Max.")
    kept = pin(world, world.alice, PUPPY)
    vectors_fill(world.bot.id)
    assert EntryVector.objects.count() == 3
    pool_purge(pool_id=world.bot.id, tag=f"from:{world.carol.person.id}")
    assert set(EntryVector.objects.values_list("entry_id", flat=True)) == {erased.id, kept.id}
    ChatFactory.create(owner=world.bob, bot=world.bot)  # erasure reaches the pools chats wrote to
    person_erase(organization=world.org, person=world.bob.person, dry_run=False)
    assert set(EntryVector.objects.values_list("entry_id", flat=True)) == {kept.id}
    assert not Entry.objects.filter(id__in=[purged.id, erased.id]).exists()


def test_vectors_rotate_with_reencrypt_and_reindex_rebuilds_lost_ones(
    world: World, settings: Any
) -> None:
    settings.OPENBOT_ENCRYPTION_KEYS = [K1]
    puppy = pin(world, world.alice, PUPPY)
    vectors_fill(world.bot.id)
    settings.OPENBOT_ENCRYPTION_KEYS = [K2, K1]
    assert run("reencrypt")["reencrypted"] >= 2  # the entry and its vector, among others
    settings.OPENBOT_ENCRYPTION_KEYS = [K2]
    assert found_ids(world, world.alice, QUESTION) == [puppy.id]
    # A vector no configured key opens (written under a key since dropped) is passed over by
    # search [X5], and reindex writes it again.
    with connection.cursor() as cursor:
        lost = Fernet(K1.encode()).encrypt(b"a vector under a dropped key").decode()
        cursor.execute('UPDATE "memory_entryvector" SET "vector" = %s', [lost])
    assert found_ids(world, world.alice, QUESTION) == []
    assert run("reindex")["vectors"] == 1
    assert found_ids(world, world.alice, QUESTION) == [puppy.id]


def test_reindex_marks_a_vector_written_before_the_mark_of_an_entry_that_only_asks(
    world: World,
) -> None:
    asked = pin(world, world.alice, "How old is the puppy now?")
    said = pin(world, world.alice, PUPPY)
    vectors_fill(world.bot.id)
    assert opened_marks(world) == {asked.id: True, said.id: False}
    for entry in (asked, said):  # as written before the mark
        EntryVector.objects.filter(entry_id=entry.id).update(
            vector=vector_seal(meaning(entry.content), only_asks=False)
        )
    assert opened_marks(world) == {asked.id: False, said.id: False}
    assert run("reindex")["vectors"] == 0
    assert opened_marks(world) == {asked.id: True, said.id: False}


def opened_marks(world: World) -> dict[str, bool]:
    rows = list(EntryVector.objects.filter(bot_id=world.bot.id).values_list("entry_id", "vector"))
    _, marks = vectors_open([vector for _, vector in rows])
    return {entry_id: bool(mark) for (entry_id, _), mark in zip(rows, marks, strict=True)}


def test_vectors_open_what_vector_seal_wrote() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(3, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    asks = [False, True, False]
    opened, asked = vectors_open(
        [vector_seal(vector, only_asks=ask) for vector, ask in zip(vectors, asks, strict=True)]
    )
    assert np.allclose(opened, vectors, atol=0.01)
    assert asked.tolist() == asks


@pytest.mark.django_db(transaction=True)
def test_remember_has_the_worker_write_the_vector(world: World) -> None:
    """The real path: Remember commits, the message (the pool's id alone) goes to the broker,
    a Dramatiq worker writes the vector."""
    broker = stub_broker()
    broker.flush_all()
    puppy = pin(world, world.alice, PUPPY)
    (message,) = broker.queues[MEANING_QUEUE].queue
    assert world.bot.id in message.decode() and "puppy" not in message.decode()
    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=50)
    worker.start()
    try:
        broker.join(MEANING_QUEUE, fail_fast=True, timeout=60_000)
        worker.join()
    finally:
        worker.stop(timeout=10_000)
    assert EntryVector.objects.filter(entry_id=puppy.id).exists()
    assert found_ids(world, world.alice, QUESTION) == [puppy.id]
