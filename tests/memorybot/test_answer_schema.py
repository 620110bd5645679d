"""[K2] Learning and enrichment send the JSON Schema of exactly the answers they accept, and a
server that refuses it is asked in the next form (`json_object` with the schema, `json_object`,
prose), the refusal remembered per server for the process.

The schema and the parser are one contract: every answer the schema allows is applied (drawn by
hypothesis from the schema a real learning step sent), and every answer the apply refuses for
its shape the schema rejects (a table). What the schema leaves to the apply is named here."""

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import services as memory
from memory.learned import learned_changes_apply_in
from memory.models import Change
from memory.services import MAX_CONTENT, is_topic
from memorybot.duty import reader_of_chat
from memorybot.enrichment import _parse, rewrite_schema
from memorybot.learning import learning_run_process
from memorybot.learning_step import CHANGES_MAX, bot_words, learning_range, parse_changes
from memorybot.models import Enrichment, LearningRun, ModelCall
from memorybot.providers import ItemText
from memorybot.providers.statements import learned_changes
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI, ReceivedRequest
from tests.memorybot.learning_world import (
    Scene,
    confided_turn,
    fact_change,
    learned,
    learning_answer,
    learning_requests,
    learning_scene,
    observation_change,
    person_item,
    run_of,
)
from tests.memorybot.scenes import enrich_requests

# What the apply refuses for an answer's shape. The schema lets none of them through (but for a
# topic's characters beyond ASCII, whose category the apply decides [E9]); what
# it leaves to the apply depends on the memory when the answer arrives (an audience wider
# than the sources allow, the bot's own words as content, rules added later) or is content
# that is blank once trimmed.
SHAPE_REFUSALS = {
    "not_a_change",
    "unknown_change",
    "bad_topic",
    "colon_tag",
    "bad_content",
    "no_sources",
    "source_outside_range",
    "source_missing",
    "bot_words_as_source",
    "no_person_source",
    "source_not_visible",
    "bad_confidence",
    "bad_audience",
}
# The keywords the answer schemas use: a new one fails `allowed`, so no schema grows past
# what these tests check.
KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "anyOf",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
}


def allowed(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Every JSON value `schema` allows (arrays of up to four items)."""
    assert set(schema) <= KEYWORDS, set(schema) - KEYWORDS
    if "anyOf" in schema:
        return st.one_of([allowed(branch) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "object":
        # Strict: every property required, no other.
        assert schema["required"] == list(schema["properties"])
        assert schema["additionalProperties"] is False
        return st.fixed_dictionaries(
            {name: allowed(value) for name, value in schema["properties"].items()}
        )
    if kind == "array":
        return st.lists(
            allowed(schema["items"]),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 4), 4),
        )
    if kind == "string" and "pattern" in schema:
        longest = schema.get("maxLength", math.inf)
        pattern = st.from_regex(schema["pattern"], fullmatch=True)
        return pattern.filter(lambda text: len(text) <= longest)
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength"))
    if kind == "number":
        return st.floats(min_value=schema["minimum"], max_value=schema["maximum"]) | st.integers(
            min_value=math.ceil(schema["minimum"]), max_value=math.floor(schema["maximum"])
        )
    assert kind == "null", kind
    return st.none()


def topics_of(change: dict[str, Any]) -> list[str]:
    """Every topic a change names."""
    named = [*change.get("topics", []), *change.get("add", []), *change.get("remove", [])]
    return named + [change[key] for key in ("from", "to") if key in change]


def rejects(schema: Mapping[str, Any], answer: Any) -> bool:
    return not jsonschema.Draft202012Validator(schema).is_valid(answer)


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> Scene:
    return learning_scene(world, "I moved to Berlin. Please move my dentist visit.")


def learned_once(fake: FakeOpenAI, scene: Scene, changes: list[Any]) -> ReceivedRequest:
    """Run the scene's learning step with `changes` as the model's answer; the request it
    sent (the last learning request that reached the server)."""
    learning_answer(fake, changes)
    learning_run_process(run_id=run_of(scene.turn).id)
    return learning_requests(fake)[-1]


def test_the_learning_step_sends_the_schema_of_its_changes(
    fake_openai: FakeOpenAI, scene: Scene
) -> None:
    asked = learned_once(fake_openai, scene, [fact_change("alice lives in Berlin", scene.said)])
    assert learning_requests(fake_openai) == [asked]  # asked once
    assert asked.answer_form == "json_schema"
    assert asked.body["temperature"] == 0  # the most likely answer, the same every time
    response_format = asked.body["response_format"]
    assert response_format["json_schema"]["name"] == "learning_changes"
    assert response_format["json_schema"]["strict"] is True
    schema = asked.answer_schema
    # Facts name the person items shown, never the bot's, a notice or another chat; the
    # entries named are the ones the run's reader may see (not bob's, not an invalidated one).
    changes = schema["properties"]["changes"]["items"]["anyOf"]
    add_fact = changes[0]["properties"]
    assert add_fact["sources"]["items"]["properties"]["item"]["enum"] == [scene.said.public_id]
    assert add_fact["sources"]["items"]["properties"]["chat"]["enum"] == [scene.chat.id]
    invalidate = next(c for c in changes if c["properties"]["kind"]["enum"] == ["invalidate"])
    assert invalidate["properties"]["id"]["enum"] == [scene.mine.id]
    assert run_of(scene.turn).status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(scene.chat)] == ["alice lives in Berlin"]
    # [E9] A topic's pattern bounds it by itself: llama.cpp's grammar of a string with a
    # `pattern` leaves out its `maxLength`, and a small model then wrote a topic until its
    # tokens ran out (an answer cut off mid-string).
    topic = add_fact["topics"]["items"]["pattern"]
    assert re.fullmatch(topic, "küche-2") and re.fullmatch(topic, "料理")
    assert not re.fullmatch(topic, "k" * 21) and not re.fullmatch(topic, "a-b-c-d")


def test_every_answer_the_learning_schema_allows_is_applied(
    fake_openai: FakeOpenAI, scene: Scene
) -> None:
    schema = learned_once(fake_openai, scene, []).answer_schema
    run = run_of(scene.turn)
    chat = scene.chat
    within = learning_range(run, chat, first_seq=(run.start_seq or 0) + 1, bot_words=bot_words(run))
    reader = reader_of_chat(chat, run.turn.person_id)

    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(answer=allowed(schema))
    def applied(answer: dict[str, Any]) -> None:
        changes = parse_changes(json.dumps(answer))
        assert changes is not None and changes == answer["changes"]
        with transaction.atomic():
            with memory.pool_change(pool_id=chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as c:
                refusals = learned_changes_apply_in(
                    c, proposals=changes, within=within, reader=reader
                )
            transaction.set_rollback(True)  # each answer on the same memory
        for refusal in refusals:
            refused = changes[refusal.change]
            # An entry an earlier change of the same answer invalidated is no longer active.
            gone = {c["id"] for c in changes[: refusal.change] if c["kind"] == "invalidate"}
            named = {refused.get("id"), *(s.get("entry") for s in refused.get("sources", []))}
            if refusal.reason == "bad_content":
                assert not refused["content"].strip(), "only blank content is left to the apply"
            elif refusal.reason == "bad_topic":
                # [E9] Only whether a character beyond ASCII is a lowercase letter, a digit or
                # a mark is left to the apply.
                bad = [topic for topic in topics_of(refused) if not is_topic(topic)]
                assert bad and not any(topic.isascii() for topic in bad), refusal
            elif refusal.reason == "source_not_visible":
                assert named & gone, refusal
            else:
                assert refusal.reason not in SHAPE_REFUSALS, (refusal, refused)

    applied()


def test_what_the_apply_refuses_for_its_shape_the_schema_rejects(
    world: World, fake_openai: FakeOpenAI, scene: Scene
) -> None:
    schema = learned_once(fake_openai, scene, []).answer_schema
    elsewhere = ItemFactory.create(
        chat=ChatFactory.create(owner=world.alice, bot=world.bot), person=world.alice.person
    )
    # Answers the schema allows, and each refused one differs from one of them in one thing.
    said = fact_change("x", scene.said)
    seen = {**observation_change("x", scene.mine.id), "audience": None}
    valid = [
        said,
        seen,
        {"kind": "topics", "id": scene.mine.id, "add": ["tea"], "remove": []},
        {"kind": "rename", "from": "tea", "to": "drinks"},
        {"kind": "rename", "from": "küche", "to": "料理"},  # [E9] any script
        {"kind": "invalidate", "id": scene.mine.id},
    ]
    refused: list[tuple[Any, str]] = [
        ("add Berlin", "not_a_change"),
        ({**said, "kind": "remember"}, "unknown_change"),
        ({**said, "topics": ["for:bot"]}, "colon_tag"),
        ({**said, "topics": ["Health"]}, "bad_topic"),
        ({**said, "topics": ["health--care"]}, "bad_topic"),
        ({**said, "topics": ["a" * 65]}, "bad_topic"),
        ({**said, "topics": ["Küche"]}, "bad_topic"),
        (fact_change("x", scene.answered), "bot_words_as_source"),
        (fact_change("x", scene.said, scene.answered), "bot_words_as_source"),
        (fact_change("x", scene.notice), "no_person_source"),
        (fact_change("x", scene.tool_result), "no_person_source"),
        (fact_change("x", elsewhere), "source_outside_range"),
        ({**said, "sources": [{"chat": scene.chat.id, "item": "i-99"}]}, "source_outside_range"),
        ({**said, "sources": [scene.said.public_id]}, "source_outside_range"),
        ({**said, "sources": []}, "no_sources"),
        ({**said, "content": ""}, "bad_content"),
        ({**said, "content": "x" * (MAX_CONTENT + 1)}, "bad_content"),
        ({**said, "content": {"text": "x"}}, "bad_content"),
        ({**seen, "sources": [{"entry": scene.bobs.id}]}, "source_not_visible"),
        ({**seen, "sources": [{"entry": scene.old.id}]}, "source_not_visible"),
        ({**seen, "sources": []}, "no_sources"),
        ({**seen, "confidence": 1.5}, "bad_confidence"),
        ({**seen, "confidence": "0.5"}, "bad_confidence"),
        ({**seen, "audience": "channel"}, "bad_audience"),  # a private chat has no channel
        ({**seen, "audience": "everyone"}, "bad_audience"),
        ({"kind": "invalidate", "id": scene.bobs.id}, "source_not_visible"),
        ({"kind": "invalidate", "id": scene.old.id}, "source_not_visible"),
        ({"kind": "topics", "id": scene.mine.id, "add": ["Tea"], "remove": []}, "bad_topic"),
        ({"kind": "rename", "from": "tea", "to": "org:x"}, "colon_tag"),
    ]
    run = run_of(scene.turn)
    within = learning_range(
        run, scene.chat, first_seq=(run.start_seq or 0) + 1, bot_words=bot_words(run)
    )
    reader = reader_of_chat(scene.chat, run.turn.person_id)
    with memory.pool_change(pool_id=scene.chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as pool:
        refusals = learned_changes_apply_in(
            pool, proposals=[proposed for proposed, _ in refused], within=within, reader=reader
        )
    assert [(r.change, r.reason) for r in refusals] == [
        (index, reason) for index, (_, reason) in enumerate(refused)
    ]
    for proposed, reason in refused:
        assert rejects(schema, {"changes": [proposed]}), (reason, proposed)
    # [E9] Left to the apply: whether a character beyond ASCII is a lowercase letter.
    assert not rejects(schema, {"changes": [{**said, "topics": ["Ärger"]}]})
    # Every valid change, in answers of at most CHANGES_MAX changes each.
    for start in range(0, len(valid), CHANGES_MAX):
        assert not rejects(schema, {"changes": valid[start : start + CHANGES_MAX]})
    with memory.pool_change(pool_id=scene.chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as pool:
        assert learned_changes_apply_in(pool, proposals=valid, within=within, reader=reader) == []
    # What the offline model proposes for the same step is an answer the schema allows.
    offline = learned_changes(
        [
            ItemText(
                chat=scene.chat.id, item=scene.said.public_id, kind="person", text=scene.said.text
            )
        ],
        (),
    )
    assert offline and not rejects(schema, {"changes": offline})


def test_a_server_that_refuses_the_schema_is_asked_the_next_form_and_remembered(
    world: World, fake_openai: FakeOpenAI, scene: Scene
) -> None:
    # llama-cpp-python's server: HTTP 500 naming `response_format` for `json_schema`; the
    # schema inside `json_object` works.
    fake_openai.refused_forms = {"json_schema"}
    fake_openai.refusal_status = 500
    learned_once(fake_openai, scene, [fact_change("alice lives in Berlin", scene.said)])
    learning = learning_requests(fake_openai)
    assert [(r.answer_form, r.refused) for r in learning] == [
        ("json_schema", True),
        ("json_object+schema", False),
    ]
    assert learning[1].answer_schema == learning[0].answer_schema
    # One call, recorded once, and its answer applied.
    assert ModelCall.objects.filter(purpose="learning").count() == 1
    assert [entry.content for entry in learned(scene.chat)] == ["alice lives in Berlin"]

    # The next call to this server goes straight to the form it took.
    turn = confided_turn(scene.chat, world.alice, "I work at the harbour.")
    already = len(learning_requests(fake_openai))
    learning_answer(fake_openai, [fact_change("alice works at the harbour", person_item(turn))])
    learning_run_process(run_id=run_of(turn).id)
    assert [r.answer_form for r in learning_requests(fake_openai)[already:]] == [
        "json_object+schema"
    ]
    assert run_of(turn).applied == 1


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_server_that_refuses_every_json_form_is_asked_in_prose(
    fake_openai: FakeOpenAI, scene: Scene, status: int
) -> None:
    fake_openai.refused_forms = {"json_schema", "json_object+schema", "json_object"}
    fake_openai.refusal_status = status
    # A small model in prose, as the parser reads it (`first_json_object`).
    answer = {"changes": [fact_change("alice lives in Berlin", scene.said)]}
    fake_openai.reply(content=f"Here are the changes:\n{json.dumps(answer)}\nDone.")
    learning_run_process(run_id=run_of(scene.turn).id)
    assert [r.answer_form for r in learning_requests(fake_openai)] == [
        "json_schema",
        "json_object+schema",
        "json_object",
        "prose",
    ]
    assert "response_format" not in learning_requests(fake_openai)[-1].body
    assert run_of(scene.turn).status == LearningRun.Status.DONE
    assert [entry.content for entry in learned(scene.chat)] == ["alice lives in Berlin"]


@pytest.mark.parametrize("status", [400, 500])
def test_a_server_error_that_is_no_refusal_of_the_form_is_not_remembered(
    world: World, fake_openai: FakeOpenAI, scene: Scene, status: int
) -> None:
    # An error that says nothing of the answer form (say, a prompt too long): the step fails
    # as any HTTP error does, and the next call asks for the schema again.
    fake_openai.reply(status=status)
    learning_run_process(run_id=run_of(scene.turn).id)
    run = run_of(scene.turn)
    assert (run.status, run.error) == (LearningRun.Status.FAILED, LearningRun.Error.MODEL_ERROR)
    turn = confided_turn(scene.chat, world.alice, "I work at the harbour.")
    already = len(learning_requests(fake_openai))
    learning_answer(fake_openai, [])
    learning_run_process(run_id=run_of(turn).id)
    assert [r.answer_form for r in learning_requests(fake_openai)[already:]] == ["json_schema"]


def test_enrichment_falls_back_too_and_still_rewrites(
    world: World, fake_openai: FakeOpenAI, scene: Scene
) -> None:
    fake_openai.refused_forms = {"json_schema"}
    before = len(enrich_requests(fake_openai))
    words = "What tea should I buy?"
    rewritten = f"{words} I like tea."
    fake_openai.reply(content=json.dumps({"text": rewritten, "entries": [scene.mine.id]}))
    confided_turn(scene.chat, world.alice, words)
    asked = enrich_requests(fake_openai)[before:]
    assert [(r.answer_form, r.refused) for r in asked] == [
        ("json_schema", True),
        ("json_object+schema", False),
    ]
    assert asked[1].answer_schema["properties"]["entries"]["items"]["enum"] == [scene.mine.id]
    assert asked[1].body["temperature"] == 0
    assert Enrichment.objects.get(chat=scene.chat).text == rewritten


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_rewrite_the_enrichment_schema_allows_is_read(data: st.DataObject) -> None:
    entry_ids = data.draw(st.lists(st.sampled_from(["mem_a", "mem_b", "mem_c"]), min_size=1))
    answer = data.draw(allowed(rewrite_schema(entry_ids).schema))
    parsed = _parse(json.dumps(answer))
    if not answer["text"].strip():
        assert parsed is None  # blank text is left to the parser
    else:
        assert parsed == (answer["text"], list(dict.fromkeys(answer["entries"])))


def test_what_enrichment_refuses_the_schema_rejects() -> None:
    schema = rewrite_schema(["mem_a"]).schema
    for answer in [
        {"text": "", "entries": []},
        {"text": 5, "entries": []},
        {"text": "x", "entries": "mem_a"},
        {"text": "x", "entries": [7]},
        {"entries": ["mem_a"]},
        {"text": "x"},
    ]:
        assert _parse(json.dumps(answer)) is None
        assert rejects(schema, answer), answer


def test_a_line_break_written_raw_inside_a_string_is_read(
    fake_openai: FakeOpenAI, scene: Scene
) -> None:
    # llama.cpp's grammar for a JSON string lets a model write control characters raw.
    change = json.dumps(fact_change("alice lives in Berlin", scene.said))
    fake_openai.reply(content='{"changes": [' + change.replace(" in ", " in\n", 1) + "]}")
    learning_run_process(run_id=run_of(scene.turn).id)
    assert [entry.content for entry in learned(scene.chat)] == ["alice lives in\nBerlin"]
