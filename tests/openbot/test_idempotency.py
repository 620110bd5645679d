"""[F9] `Idempotency-Key` on `POST /v1/chats/:id/turns` and `POST /v1/bots/:id/memory`: a retry
with the key answers what the first request answered and changes nothing (one turn, one
entry); 409 while the first runs and for another request with the key; 400 for a bad key; a
key older than 24 hours is new. The answer is kept as a reference only and rendered again from
the rows: once a purge, a Forget or a history deletion removed what it showed, a replay shows
nothing of it (409 `idempotency_answer_gone`). Turns are real turns over HTTP (the offline
model, or the fake OpenAI-compatible server where a turn must be slow); nothing of ours is
mocked.
"""

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from pytest_django.fixtures import Settings

from chats.models import Item, Turn
from chats.services import turns_end_abandoned
from memory.lock import pool_key
from memory.models import Entry
from openbot import services
from openbot.idempotency import HEADER, STALE_AFTER_DEADLINE_SECONDS
from openbot.models import IdempotencyKey
from tests.conftest import Actor, World, error_fields
from tests.database_cut import ANSWER_DELAY_S, cut_while_the_model_answers
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    OFFLINE_MODEL,
    bot_model_set,
    chat_open,
    memory_model_set,
)

WORDS = "My sister Jana visits on the ninth of May."
NOTE = "Jana prefers the window seat."
KEY = "retry-7f3a:2026-05-01 turn#1"

Response = Any


@pytest.fixture
def scene(world: World) -> World:
    """The offline memory bot and bot: turns need no server."""
    memory_model_set(world.org, OFFLINE_MODEL)
    bot_model_set(world.bot, OFFLINE_MODEL)
    return world


def post(actor: Actor, path: str, body: dict[str, Any], key: str | None) -> Response:
    """`POST path` as `actor`, with `Idempotency-Key: key` unless `key` is None."""
    headers: dict[str, Any] = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return actor.client().post(path, body, format="json", **headers)


def post_turn(actor: Actor, chat_id: str, text: str, key: str | None = KEY) -> Response:
    return post(actor, f"/v1/chats/{chat_id}/turns", {"text": text}, key)


def remember(actor: Actor, bot_id: str, content: str, key: str | None = KEY) -> Response:
    body = {"command": {"_tag": "Remember", "content": content}}
    return post(actor, f"/v1/bots/{bot_id}/memory", body, key)


def forget(actor: Actor, bot_id: str, entry_id: str, key: str | None = KEY) -> Response:
    body = {"command": {"_tag": "Forget", "id": entry_id}}
    return post(actor, f"/v1/bots/{bot_id}/memory", body, key)


def replayed(response: Response) -> bool:
    return response.headers.get("Idempotent-Replayed") == "true"


def person_items(chat_id: str) -> int:
    return Item.objects.filter(chat_id=chat_id, kind=Item.Kind.PERSON).count()


def error_code(response: Response) -> str:
    return str(response.json()["error"]["code"])


# --- the same key twice: one turn, one entry, the same answer -----------------------------


def test_a_turn_sent_twice_with_a_key_is_taken_once(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    first = post_turn(scene.alice, chat_id, WORDS)
    again = post_turn(scene.alice, chat_id, WORDS)

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert not replayed(first) and replayed(again)
    assert Turn.objects.filter(chat_id=chat_id).count() == 1
    assert person_items(chat_id) == 1
    # Without a key, the same words are a turn of their own, as before.
    assert post_turn(scene.alice, chat_id, WORDS, key=None).status_code == 201
    assert person_items(chat_id) == 2


def test_a_remember_sent_twice_with_a_key_is_one_entry(scene: World) -> None:
    first = remember(scene.alice, scene.bot.id, NOTE)
    again = remember(scene.alice, scene.bot.id, NOTE)

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert replayed(again)
    assert Entry.objects.count() == 1
    # As GET shows the entry.
    shown = scene.alice.client().get(f"/v1/bots/{scene.bot.id}/memory/{first.json()['id']}")
    assert shown.json() == first.json()
    assert remember(scene.alice, scene.bot.id, NOTE, key=None).status_code == 201
    assert Entry.objects.count() == 2


def test_a_forget_sent_twice_with_a_key_answers_the_same(scene: World) -> None:
    entry_id = remember(scene.alice, scene.bot.id, NOTE, key=None).json()["id"]
    first = forget(scene.alice, scene.bot.id, entry_id)
    again = forget(scene.alice, scene.bot.id, entry_id)

    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() == {"ok": True}
    assert replayed(again)
    # Sent again without the key, it is run again: the entry is no longer for her.
    assert forget(scene.alice, scene.bot.id, entry_id, key=None).status_code == 409


def test_an_error_answer_does_not_use_the_key(scene: World) -> None:
    """A request that changed nothing (here a Forget of an entry that is not hers: 409) gives
    its key back: sent again, it is run again."""
    entry_id = remember(scene.bob, scene.bot.id, NOTE, key=None).json()["id"]
    assert error_code(forget(scene.alice, scene.bot.id, entry_id)) == "not_for_you"
    assert error_code(forget(scene.alice, scene.bot.id, entry_id)) == "not_for_you"
    assert not IdempotencyKey.objects.exists()


# --- another request, another person, another organization --------------------------------


def test_the_key_with_another_request_is_409_and_changes_nothing(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    other_chat = chat_open(scene.alice, scene.bot)
    first = post_turn(scene.alice, chat_id, WORDS)
    assert first.status_code == 201

    others = [
        post_turn(scene.alice, chat_id, "Another text."),  # another body
        post_turn(scene.alice, other_chat, WORDS),  # another target
        remember(scene.alice, scene.bot.id, WORDS),  # another route
    ]

    for response in others:
        assert response.status_code == 409, response.content
        assert error_code(response) == "idempotency_key_reused"
        assert HEADER in response.json()["error"]["message"]
    assert Item.objects.count() == 2 and Entry.objects.count() == 0
    assert post_turn(scene.alice, chat_id, WORDS).json() == first.json()


def test_another_persons_key_is_theirs(scene: World) -> None:
    alices = remember(scene.alice, scene.bot.id, NOTE)
    bobs = remember(scene.bob, scene.bot.id, NOTE)

    assert alices.status_code == bobs.status_code == 201
    assert not replayed(bobs) and bobs.json()["id"] != alices.json()["id"]
    assert Entry.objects.count() == 2


def test_a_key_is_held_per_organization(scene: World) -> None:
    """Alice's token for another organization uses the key afresh, there: not a reuse."""
    services.membership_add(organization=scene.other_org, person=scene.alice.person)
    elsewhere = Actor(
        person=scene.alice.person,
        organization=scene.other_org,
        token=services.token_create(person=scene.alice.person, organization=scene.other_org),
    )
    assert remember(scene.alice, scene.bot.id, NOTE).status_code == 201

    response = remember(elsewhere, scene.other_bot.id, NOTE)

    assert response.status_code == 201 and not replayed(response)


# --- the header itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("", id="empty"),
        pytest.param("k" * 256, id="too-long"),
        pytest.param("schlüssel", id="not-ascii"),
        pytest.param("tab\tkey", id="control"),
        pytest.param(" key", id="leading-space"),
        pytest.param("key ", id="trailing-space"),
    ],
)
def test_a_bad_key_is_400_naming_the_header(scene: World, key: str) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    for response in (
        post_turn(scene.alice, chat_id, WORDS, key=key),
        remember(scene.alice, scene.bot.id, NOTE, key=key),
    ):
        assert response.status_code == 400
        assert HEADER in error_fields(response)
    assert Item.objects.count() == 0 and Entry.objects.count() == 0


@pytest.mark.parametrize("key", ["k" * 255, "a", "two words", "!~", "550e8400-e29b-41d4"])
def test_printable_ascii_keys_are_taken(scene: World, key: str) -> None:
    assert remember(scene.alice, scene.bot.id, NOTE, key=key).status_code == 201
    assert replayed(remember(scene.alice, scene.bot.id, NOTE, key=key))


def test_a_key_older_than_24_hours_is_new(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    first = post_turn(scene.alice, chat_id, WORDS)
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    again = post_turn(scene.alice, chat_id, WORDS)

    assert again.status_code == 201 and not replayed(again)
    assert again.json()["turn"]["id"] != first.json()["turn"]["id"]
    assert person_items(chat_id) == 2
    # The old record was pruned on the way; the new one holds the key.
    assert IdempotencyKey.objects.count() == 1
    assert replayed(post_turn(scene.alice, chat_id, WORDS))


def test_records_hold_no_content_and_not_the_key(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    post_turn(scene.alice, chat_id, WORDS)
    remember(scene.alice, scene.bot.id, NOTE, key=f"{KEY}-2")
    rows = list(IdempotencyKey.objects.values())
    assert len(rows) == 2
    stored = repr(rows)
    for secret in (KEY, WORDS, NOTE, "Jana"):
        assert secret not in stored


# --- a replay shows nothing that was removed since (no copy of the answer is kept) --------


def test_a_turn_replayed_after_its_history_was_deleted_shows_nothing(scene: World) -> None:
    chat_id = chat_open(scene.alice, scene.bot)
    assert post_turn(scene.alice, chat_id, WORDS).status_code == 201
    assert scene.alice.client().delete(f"/v1/chats/{chat_id}/items").status_code == 204

    again = post_turn(scene.alice, chat_id, WORDS)

    assert again.status_code == 409
    assert error_code(again) == "idempotency_answer_gone"
    assert "Jana" not in again.content.decode()
    assert Item.objects.filter(chat_id=chat_id).count() == 0  # and nothing was run again


def test_a_remember_replayed_after_a_purge_shows_nothing(scene: World) -> None:
    assert remember(scene.alice, scene.bot.id, NOTE).status_code == 201
    purge = scene.alice.client().post(
        f"/v1/bots/{scene.bot.id}/memory/purge",
        {"tag": f"from:{scene.alice.person.id}"},
        format="json",
    )
    assert purge.json() == {"removed": 1}

    again = remember(scene.alice, scene.bot.id, NOTE)

    assert again.status_code == 409
    assert error_code(again) == "idempotency_answer_gone"
    assert "Jana" not in again.content.decode()
    assert Entry.objects.count() == 0


def test_a_remember_replayed_after_a_forget_shows_nothing(scene: World) -> None:
    entry_id = remember(scene.alice, scene.bot.id, NOTE).json()["id"]
    assert forget(scene.alice, scene.bot.id, entry_id, key=None).status_code == 200

    again = remember(scene.alice, scene.bot.id, NOTE)

    assert again.status_code == 409
    assert "Jana" not in again.content.decode()
    assert Entry.objects.count() == 1


def test_a_replay_needs_the_same_access_as_the_request(scene: World) -> None:
    """A replay is answered through the route's own checks: carol, out of the channel, gets
    the 404 anyone without the chat gets."""
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    assert post_turn(scene.carol, chat_id, WORDS).status_code == 201
    services.channel_member_remove(channel=scene.channel, person=scene.carol.person)

    assert post_turn(scene.carol, chat_id, WORDS).status_code == 404


# --- at once: exactly one runs (threads, each with its own connection) ---------------------


def in_thread(work: Callable[[], Response], results: list[Response]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_turn_runs_is_409_then_the_answer(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_model_set(world.org, None)  # the bot's answer is the only request to the server
    bot_model_set(world.bot, FAKE_MODEL)
    chat_id = chat_open(world.alice, world.bot)
    fake_openai.reply(content="Say hello to Jana.", delay=1.0)
    results: list[Response] = []
    first = in_thread(lambda: post_turn(world.alice, chat_id, WORDS), results)
    assert fake_openai.wait_for_requests(1)  # the turn has started and waits for its answer

    during = post_turn(world.alice, chat_id, WORDS)
    first.join()
    after = post_turn(world.alice, chat_id, WORDS)

    assert during.status_code == 409
    assert error_code(during) == "idempotency_key_in_use"
    [answered] = results
    assert answered.status_code == after.status_code == 201
    assert after.json() == answered.json()
    assert answered.json()["items"][1]["text"] == "Say hello to Jana."
    assert len(fake_openai.requests) == 1
    assert person_items(chat_id) == 1


@pytest.mark.django_db(transaction=True)
def test_requests_sent_at_once_with_one_key_make_one_entry(world: World) -> None:
    gate = threading.Barrier(4)
    results: list[Response] = []

    def at_once() -> Response:
        gate.wait()
        return remember(world.alice, world.bot.id, NOTE)

    threads = [in_thread(at_once, results) for _ in range(4)]
    for thread in threads:
        thread.join()

    assert Entry.objects.count() == 1
    statuses = sorted((response.status_code, replayed(response)) for response in results)
    assert statuses[0] == (201, False)
    assert set(statuses[1:]) <= {(201, True), (409, False)}
    entry_id = Entry.objects.get().id
    assert all(r.json()["id"] == entry_id for r in results if r.status_code == 201)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's advisory lock")
@pytest.mark.django_db(transaction=True)
def test_a_stale_claim_is_taken_over_and_its_first_holder_commits_nothing(
    world: World, settings: Settings
) -> None:
    """A claim that stays empty past the turn deadline and a margin counts as lost with its
    process: a retry takes it over. Here the first request was only slow (waiting for the
    pool's lock, held by a purge-like change elsewhere): when it goes on, it finds the key no
    longer its own and rolls back. Whichever comes first, one entry, one answer."""
    settings.OPENBOT_TURN_DEADLINE_SECONDS = 1
    db = connection.settings_dict
    holder = psycopg.connect(
        dbname=db["NAME"], host=db["HOST"], port=db["PORT"] or None, user=db["USER"]
    )
    holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x0B0A, int(pool_key(world.bot.id))])
    results: list[Response] = []
    try:
        slow = in_thread(lambda: remember(world.alice, world.bot.id, NOTE), results)
        first_claim = wait_for(lambda: IdempotencyKey.objects.values_list("pk", flat=True).first())
        IdempotencyKey.objects.update(
            created_at=timezone.now() - timedelta(seconds=1 + STALE_AFTER_DEADLINE_SECONDS + 1)
        )
        retry = in_thread(lambda: remember(world.alice, world.bot.id, NOTE), results)
        wait_for(lambda: IdempotencyKey.objects.exclude(pk=first_claim).exists())
    finally:
        holder.rollback()
        holder.close()
    slow.join()
    retry.join()

    assert Entry.objects.count() == 1
    entry_id = Entry.objects.get().id
    answered = sorted((r.status_code, r.json().get("id")) for r in results)
    assert answered in ([(201, entry_id), (201, entry_id)], [(201, entry_id), (409, None)])


def wait_for(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll `condition` (on this thread's connection) until it is truthy; its value."""
    stop = threading.Event()
    for _ in range(int(timeout / 0.02)):
        value = condition()
        if value:
            return value
        stop.wait(0.02)
    raise AssertionError("the condition never held")


# --- the database lost after the person's words were stored -------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a server that refuses connections")
@pytest.mark.django_db(transaction=True)
def test_a_turn_the_database_failed_is_not_taken_again_by_its_retry(
    world: World, fake_openai: FakeOpenAI
) -> None:
    """Issue 25: the database went away while the bot's model answered, after the person's
    words were stored; the request failed. Its retry with the key, once the database is back,
    takes no second turn: 409 while the turn is open, then the turn as the recovery pass ended
    it, with its error code."""
    memory_model_set(world.org, None)
    bot_model_set(world.bot, FAKE_MODEL)
    chat_id = chat_open(world.alice, world.bot)
    fake_openai.reply(content="Say hello to Jana.", delay=ANSWER_DELAY_S)
    client = world.alice.client()
    client.raise_request_exception = False

    with cut_while_the_model_answers(fake_openai, outage=True):
        failed = client.post(
            f"/v1/chats/{chat_id}/turns", {"text": WORDS}, format="json", HTTP_IDEMPOTENCY_KEY=KEY
        )

    assert failed.status_code >= 500
    assert person_items(chat_id) == 1  # the words were stored before the outage

    during = post_turn(world.alice, chat_id, WORDS)
    assert during.status_code == 409 and error_code(during) == "idempotency_key_in_use"
    # What the recovery pass does for a turn its process left open [C6].
    assert turns_end_abandoned(started_before=timezone.now() + timedelta(seconds=1)) == 1
    after = post_turn(world.alice, chat_id, WORDS)

    assert after.status_code == 201 and replayed(after)
    body = after.json()
    assert body["turn"]["error"] == Turn.Error.ABANDONED
    assert [(item["kind"], item["text"]) for item in body["items"]] == [("person", WORDS)]
    assert person_items(chat_id) == 1
