"""[C6, X5, B6] A turn always ends, within its deadline, whatever fails after the person's item
is stored: a model server that answers one byte a second, a bot model that fails, a stored
text no key opens, a damaged setting. The turn gets the bot's item (the no-answer text when
there is none), its end and its event; what went wrong is a code on the turn; the route
answers 201. Every failure here comes from a real source — the fake server over HTTP, or a
row damaged with raw SQL — never from mocking our own code.
"""

import logging
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from pytest_django.fixtures import Settings

from chats.models import Event, Item, Turn
from conversations.turns import NO_ANSWER
from memory.models import Entry, Pool
from memorybot.confide import CALM_REPLY
from memorybot.models import Confession, Enrichment, ModelCall
from tests.conftest import Actor, World
from tests.database_cut import ANSWER_DELAY_S, cut_while_the_model_answers
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    bot_model_set,
    bot_requests,
    chat_open,
    confide_call,
    enrich_requests,
    enrichment_answer,
    last_user_text,
    memory_bot_requests,
    memory_model_set,
    pool_settings,
    take_turn,
    tool_answers,
)

WORDS = "Which trail should I hike with my dog this weekend?"
NOTE = "Alice's dog Fennel is old and tires after five kilometres."
# One byte a second: each read gets a byte long before any per-read timeout would fire.
ONE_BYTE_A_SECOND = 1.0


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    """The memory bot and the bot on the fake server; alice has an entry that could help."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    EntryFactory.create(author=world.alice, bot=world.bot, content=NOTE)
    return world


def damage(model: type[Model], pk: Any, column: str) -> str:
    """Flip one character in the middle of a stored ciphertext with raw SQL, so that no key
    opens it any more; returns what is stored now."""
    table = connection.ops.quote_name(model._meta.db_table)
    column = connection.ops.quote_name(column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        (token,) = cursor.fetchone()
        middle = len(token) // 2
        flipped = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [flipped, pk])
    return str(flipped)


def turn_ends(actor: Actor, chat_id: str, text: str, *, reply: str) -> Turn:
    """`actor` takes a turn over HTTP (201); it ended with the bot's item saying `reply`, its
    end and its event, and the response shows its error code."""
    body = take_turn(actor, chat_id, text)
    turn = Turn.objects.get(pk=body["turn"]["id"])
    assert turn.ended_at is not None and body["turn"]["endedAt"] is not None
    assert turn.end_seq == Item.objects.filter(chat_id=turn.chat_id).count()
    assert Event.objects.filter(kind=Event.Kind.TURN_ENDED, turn=turn).exists()
    assert [(item["kind"], item["text"]) for item in body["items"]] == [
        ("person", text),
        ("bot", reply),
    ]
    assert body["turn"]["error"] == (turn.error or None)
    return turn


def statuses(purpose: str) -> list[tuple[str, str]]:
    return list(
        ModelCall.objects.filter(purpose=purpose).order_by("id").values_list("status", "error_kind")
    )


# --- [B6, C6] wall-clock deadlines --------------------------------------------------------


def test_a_memory_bot_that_answers_one_byte_a_second_is_cut_off_at_the_deadline(
    scene: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_REPLY_DEADLINE_SECONDS = 2
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(f"{WORDS} {NOTE}", []), trickle=ONE_BYTE_A_SECOND)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="You are doing fine.", trickle=ONE_BYTE_A_SECOND)
    fake_openai.reply(content="A short trail is best.")

    turn = turn_ends(scene.alice, chat_id, WORDS, reply="A short trail is best.")

    assert turn.error == ""  # the memory bot standing aside is the calm path, not a failure
    # Both waits were cut at their deadline (not answered late), and the server saw the
    # client hang up before it had sent its answer.
    assert statuses("enrichment") == statuses("confide") == [("timeout", "timeout")]
    assert fake_openai.wait_until_answered()
    assert [request.hung_up for request in memory_bot_requests(fake_openai)] == [True, True]
    first, second = bot_requests(fake_openai)
    assert last_user_text(first) == WORDS
    assert tool_answers(second) == [CALM_REPLY]
    assert Enrichment.objects.count() == 0
    assert list(Confession.objects.values_list("reply", flat=True)) == [CALM_REPLY]


def test_a_turn_answers_by_its_own_deadline_when_the_bots_model_is_slow(
    scene: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_TURN_DEADLINE_SECONDS = 2  # the answer's own deadline stays 60 s
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []))
    fake_openai.reply(content="A short trail is best.", trickle=ONE_BYTE_A_SECOND)

    turn = turn_ends(scene.alice, chat_id, WORDS, reply=NO_ANSWER)

    assert turn.error == Turn.Error.TIMEOUT
    assert statuses("answer") == [("timeout", "timeout")]
    assert fake_openai.wait_until_answered()
    assert bot_requests(fake_openai)[0].hung_up


def test_enrichment_confide_and_the_answer_share_the_turns_deadline(
    scene: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    """The confession's wait (15 s of its own) ends with the turn's 2 s; the next answer round
    then has no time left and is recorded without reaching the server."""
    settings.OPENBOT_TURN_DEADLINE_SECONDS = 2
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []))
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="You are doing fine.", delay=5.0)
    fake_openai.reply(content="A short trail is best.")

    turn = turn_ends(scene.alice, chat_id, WORDS, reply=NO_ANSWER)

    assert turn.error == Turn.Error.TIMEOUT
    assert len(fake_openai.requests) == 3  # enrichment, first answer round, confession
    assert [status for status, _ in statuses("confide")] == ["timeout"]
    assert [status for status, _ in statuses("answer")] == ["ok", "timeout"]
    assert list(Confession.objects.values_list("reply", flat=True)) == [CALM_REPLY]


# --- [X5, C6] stored text no key opens ----------------------------------------------------


def test_a_damaged_history_item_is_left_out_and_the_turn_ends(
    scene: World, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    memory_model_set(scene.org, None)  # only the bot's own model on the server
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content="Take the forest loop.")
    take_turn(scene.alice, chat_id, WORDS)
    fake_openai.reply(content="About an hour.")
    take_turn(scene.alice, chat_id, "And how long?")
    damaged = Item.objects.get(chat_id=chat_id, seq=2)
    stored = damage(Item, damaged.pk, "text")
    fake_openai.requests.clear()

    fake_openai.reply(content="Bring water.")
    with caplog.at_level(logging.WARNING, logger="conversations.turns"):
        turn = turn_ends(scene.alice, chat_id, "Anything else?", reply="Bring water.")

    assert turn.error == Turn.Error.UNREADABLE
    [request] = bot_requests(fake_openai)
    history = [(message["role"], message["content"]) for message in request.body["messages"][1:]]
    assert history == [
        ("user", WORDS),
        ("user", "And how long?"),
        ("assistant", "About an hour."),
        ("user", "Anything else?"),
    ]
    # The server says which row and column, never what is stored there.
    assert f"chats_item row {damaged.pk} column text" in caplog.text
    assert stored not in caplog.text and stored[20:60] not in caplog.text


def test_a_damaged_entry_leaves_the_input_unchanged(scene: World, fake_openai: FakeOpenAI) -> None:
    [entry] = Entry.objects.all()
    damage(Entry, entry.pk, "content")
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="I hear you.")
    fake_openai.reply(content="A short trail is best.")

    turn = turn_ends(scene.alice, chat_id, WORDS, reply="A short trail is best.")

    # [X5] `context` leaves the entry out (logged), so nothing failed: no error on the turn.
    assert turn.error == ""
    assert enrich_requests(fake_openai) == []
    assert last_user_text(bot_requests(fake_openai)[0]) == WORDS
    assert Enrichment.objects.count() == 0


def test_a_damaged_memory_bot_setting_gives_the_calm_path(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """A budget period no code knows (written with raw SQL) makes every memory-bot call fail
    with an exception: the enrichment and the confession fail, the turn goes on."""
    pool_settings(scene.bot, budget_period="day", budget_limit_micros=10_000)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Pool._meta.db_table} SET budget_period = 'week' WHERE bot_id = %s",
            [scene.bot.pool_bot_id],
        )
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(**confide_call("I am unsure about the distance."))
    fake_openai.reply(content="A short trail is best.")

    turn = turn_ends(scene.alice, chat_id, WORDS, reply="A short trail is best.")

    assert turn.error == Turn.Error.INTERNAL
    assert memory_bot_requests(fake_openai) == []
    first, second = bot_requests(fake_openai)
    assert last_user_text(first) == WORDS
    assert tool_answers(second) == [CALM_REPLY]


# --- [C6, F9] the database lost mid-turn ----------------------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a server that ends connections")
@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_connection_the_database_dropped_still_ends_and_says_so(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """The person's item is stored, then the database drops the connection while the bot's
    model answers (a restart): the turn ends on a new connection and the route answers it
    with its error code, not 500. (The statement after a model call runs in a transaction;
    its failed rollback makes Django drop the dead connection, and the next one opens anew.)
    If the database stays away, the turn cannot end: see tests/openbot/test_idempotency.py."""
    memory_model_set(world.org, None)  # the bot's answer is the only request to the server
    bot_model_set(world.bot, FAKE_MODEL)
    chat_id = chat_open(world.alice, world.bot)
    fake_openai.reply(content="A short trail is best.", delay=ANSWER_DELAY_S)

    with cut_while_the_model_answers(fake_openai):
        turn = turn_ends(world.alice, chat_id, WORDS, reply=NO_ANSWER)

    assert turn.error == Turn.Error.INTERNAL
