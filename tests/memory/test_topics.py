"""[E9] (sharpens [E3]) Topics as the source words them: lowercase letters of any script,
digits and hyphens, in NFC — one rule (`memory.topics`) for Remember, learning, renames and the
schemas."""

import re
import unicodedata
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.learned import ChatPlace
from memory.models import Change, Entry, EntryTag
from memory.services import pool_change, topic_rename_in
from memory.topics import TOPIC_MAX_LENGTH, TOPIC_SHAPE, topic_of
from tests.conftest import World, error_fields
from tests.memory.test_learned import apply, fact, tags_of

TOPICS = ["küche", "кухня", "料理", "sport-2", "खाना", "ラーメン", "straße", "٣-أيام", "a" * 64]
NOT_TOPICS = [
    "Küche",  # [E3] uppercase is refused, not folded
    "КУХНЯ",
    "Ärger",
    "ǅ",  # titlecase
    "a--b",
    "-a",
    "a-",
    "",
    "a b",
    "a_b",
    "a.b",
    "\u0301a",  # a mark does not start a part
    "sport-\u0301",
    "tea\u00a0time",
    "😀",
    "for:bot",
    "x" * 65,
]
DECOMPOSED = unicodedata.normalize("NFD", "küche")


def memory_url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory"


def remember(world: World, tags: list[Any]) -> Any:
    body = {"command": {"_tag": "Remember", "content": "I cook a lot", "tags": tags}}
    return world.alice.client().post(memory_url(world), body, format="json")


@pytest.mark.parametrize("topic", TOPICS)
def test_lowercase_letters_of_any_script_digits_and_hyphens_are_topics(topic: str) -> None:
    assert topic_of(topic) == topic
    assert re.fullmatch(TOPIC_SHAPE, topic)


@pytest.mark.parametrize("tag", NOT_TOPICS)
def test_anything_else_is_not_a_topic(tag: str) -> None:
    assert topic_of(tag) is None


def test_a_topic_is_normalized_to_nfc() -> None:
    assert DECOMPOSED != "küche"
    assert topic_of(DECOMPOSED) == "küche"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=TOPIC_MAX_LENGTH + 2))
def test_the_schemas_shape_is_the_rule_over_ascii(text: str) -> None:
    """[E9] `TOPIC_SHAPE` lets every topic through, and decides ASCII exactly: only a
    character beyond ASCII is left to `topic_of`."""
    topic = topic_of(text)
    shaped = re.fullmatch(TOPIC_SHAPE, unicodedata.normalize("NFC", text)) is not None
    if topic is not None:
        assert shaped
    if text.isascii():
        assert shaped == (topic is not None) or len(text) > TOPIC_MAX_LENGTH


@pytest.mark.parametrize("topic", TOPICS)
def test_remember_keeps_a_topic_of_any_script(world: World, topic: str) -> None:
    response = remember(world, [topic])

    assert response.status_code == 201, response.json()
    assert response.json()["tags"][-1] == topic


@pytest.mark.parametrize("tag", ["Küche", "КУХНЯ", "ǅ", "a--b", "😀"])
def test_remember_refuses_what_is_not_a_topic_naming_the_field(world: World, tag: str) -> None:
    response = remember(world, ["tea", tag])

    assert response.status_code == 400
    assert "command.tags" in error_fields(response)
    assert "lowercase letters of any script" in response.json()["error"]["message"]
    assert not Entry.objects.exists()


def test_remember_stores_a_decomposed_topic_in_nfc(world: World) -> None:
    response = remember(world, [DECOMPOSED, "küche"])

    assert response.status_code == 201, response.json()
    # One topic: the two spellings are the same once normalized.
    assert [tag for tag in response.json()["tags"] if ":" not in tag] == ["küche"]
    assert list(EntryTag.objects.filter(kind="topic").values_list("tag", flat=True)) == ["küche"]
    # Reading by either spelling finds it.
    for spelling in ["küche", DECOMPOSED]:
        listed = world.alice.client().get(memory_url(world), {"tags": spelling}).json()
        assert [entry["id"] for entry in listed["entries"]] == [response.json()["id"]], spelling


def test_learning_keeps_topics_of_any_script_in_nfc(world: World) -> None:
    """[E9, W7] A learned fact's topics follow the same rule: normalized, or refused."""
    alice = world.alice.person.id
    place = ChatPlace(chat_id="chat_1", organization_id=world.org.id, owner_id=alice)
    proposals = [
        fact("Ich koche gern", 2, topics=(DECOMPOSED, "料理")),
        fact("Ich koche oft", 2, topics=("Küche",)),
    ]

    refusals = apply(world, proposals, place)

    assert [(refusal.change, refusal.reason) for refusal in refusals] == [(1, "bad_topic")]
    [entry] = Entry.objects.all()
    assert {"küche", "料理"} <= tags_of(entry)


def test_a_rename_normalizes_both_topics(world: World) -> None:
    """[W6, E9] A rename finds the stored (NFC) topic when the model names it decomposed."""
    entry_id = remember(world, ["küche"]).json()["id"]

    with pool_change(pool_id=world.bot.id, by=Change.By.MEMORY_BOT) as change:
        assert topic_rename_in(change, old=DECOMPOSED, new="кухня") == 1

    topics = EntryTag.objects.filter(entry_id=entry_id, kind="topic")
    assert list(topics.values_list("tag", flat=True)) == ["кухня"]


def test_the_schema_shows_the_topic_rule(db: Any) -> None:
    """[A8, E9] The OpenAPI schema gives the shape and names the format CI generates by."""
    schema = Client().get("/v1/schema?format=json").json()
    remember_schema = schema["components"]["schemas"]["RememberCommandRequest"]
    topic = remember_schema["properties"]["tags"]["items"]
    assert topic["pattern"] == TOPIC_SHAPE
    assert topic["format"] == "topic"
    assert topic["maxLength"] == TOPIC_MAX_LENGTH
