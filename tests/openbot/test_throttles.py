"""[T1] Throttling: a token, a person's writes and an address's failed authentication each
have a limit; beyond it, 429 with `Retry-After` and the error shape. Limits are set per test
(the suite runs without them); each counts in the cache, cleared before each test."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from memory.models import Entry
from settings.env import env_rate
from tests.conftest import World
from tests.memorybot.scenes import chat_open

OFF = {"token": None, "writes": None, "auth_failures": None}


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def limits(**rates: str) -> Any:
    return override_settings(OPENBOT_THROTTLE_RATES=OFF | rates)


def assert_throttled(response: Any) -> None:
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    assert response.json()["error"]["code"] == "throttled"
    assert set(response.json()) == {"error"}


def memory_url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory"


def remember(client: APIClient, world: World) -> Any:
    body = {"command": {"_tag": "Remember", "content": "I like tea."}}
    return client.post(memory_url(world), body, format="json")


def test_a_token_beyond_its_rate_gets_429(world: World) -> None:
    alice, bob = world.alice.client(), world.bob.client()
    with limits(token="3/min"):
        for _ in range(3):
            assert alice.get(memory_url(world)).status_code == 200
        assert_throttled(alice.get(memory_url(world)))
        assert_throttled(remember(alice, world))
        # Another token is counted on its own.
        assert bob.get(memory_url(world)).status_code == 200
    # Without the limit, the same token is served again.
    assert alice.get(memory_url(world)).status_code == 200


def test_a_persons_writes_beyond_their_rate_get_429_and_reads_go_on(world: World) -> None:
    alice = world.alice.client()
    with limits(writes="2/min"):
        chat_id = chat_open(world.alice, world.bot)  # a write
        assert remember(alice, world).status_code == 201
        assert_throttled(remember(alice, world))
        turn = alice.post(f"/v1/chats/{chat_id}/turns", {"text": "Hello"}, format="json")
        assert_throttled(turn)
        assert alice.get(memory_url(world)).status_code == 200
        assert remember(world.bob.client(), world).status_code == 201
    assert Entry.objects.count() == 2


def test_an_address_that_fails_to_authenticate_too_often_gets_429(world: World) -> None:
    guesser = APIClient(REMOTE_ADDR="203.0.113.7")
    guesser.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-token")
    with limits(auth_failures="3/min"):
        for _ in range(3):
            assert guesser.get(memory_url(world)).status_code == 401
        assert_throttled(guesser.get(memory_url(world)))
        # Even a good token from that address waits: the guessing is what is limited.
        good = APIClient(REMOTE_ADDR="203.0.113.7")
        good.credentials(HTTP_AUTHORIZATION=f"Bearer {world.alice.token}")
        assert_throttled(good.get(memory_url(world)))
        # Another address, and a request without a token, are answered as before.
        other = APIClient(REMOTE_ADDR="198.51.100.9")
        other.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-token")
        assert other.get(memory_url(world)).status_code == 401
        assert APIClient(REMOTE_ADDR="203.0.113.7").get(memory_url(world)).status_code == 401
        assert world.alice.client().get(memory_url(world)).status_code == 200


def test_without_limits_nothing_is_throttled(world: World) -> None:
    guesser = APIClient()
    guesser.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-token")
    for _ in range(50):
        assert guesser.get(memory_url(world)).status_code == 401
    assert world.alice.client().get(memory_url(world)).status_code == 200


@pytest.mark.parametrize(
    ("value", "rate"),
    [("120/min", "120/min"), ("5/s", "5/s"), ("1000/day", "1000/day"), ("OFF", None)],
)
def test_a_rate_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, rate: str | None
) -> None:
    monkeypatch.setenv("OPENBOT_THROTTLE_TEST", value)
    assert env_rate("OPENBOT_THROTTLE_TEST", "1/min") == rate


@pytest.mark.parametrize("value", ["0/min", "ten/min", "5/week", "5", "-1/s"])
def test_a_bad_rate_is_refused_at_start(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OPENBOT_THROTTLE_TEST", value)
    with pytest.raises(ImproperlyConfigured, match="OPENBOT_THROTTLE_TEST"):
        env_rate("OPENBOT_THROTTLE_TEST", "1/min")


REDIS = "redis://127.0.0.1:6379/14"


def test_counts_live_in_the_shared_cache_every_worker_reads(world: World) -> None:
    """With OPENBOT_CACHE_URL (Redis), a limit is counted where every gunicorn worker and
    server counts it: emptying that Redis, from outside this process, lifts it."""
    redis = pytest.importorskip("redis").Redis.from_url(REDIS)
    try:
        redis.ping()
    except Exception:  # noqa: BLE001
        pytest.skip("no Redis on 127.0.0.1:6379")
    shared = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache"}}
    shared["default"]["LOCATION"] = REDIS
    alice = world.alice.client()
    redis.flushdb()
    with override_settings(CACHES=shared), limits(token="2/min"):
        assert alice.get(memory_url(world)).status_code == 200
        assert alice.get(memory_url(world)).status_code == 200
        assert_throttled(alice.get(memory_url(world)))
        assert redis.dbsize() == 1, "one key: this token's window"
        redis.flushdb()
        assert alice.get(memory_url(world)).status_code == 200
    redis.flushdb()


def test_a_cache_that_cannot_be_reached_throttles_nothing(world: World) -> None:
    """A limit is no reason to refuse service: the request is answered (and it is logged)."""
    unreachable = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    guesser = APIClient()
    guesser.credentials(HTTP_AUTHORIZATION="Bearer obt_not-a-token")
    with override_settings(CACHES=unreachable), limits(token="1/min", auth_failures="1/min"):
        for _ in range(3):
            assert world.alice.client().get(memory_url(world)).status_code == 200
            assert guesser.get(memory_url(world)).status_code == 401


def test_the_schema_says_every_operation_with_a_token_may_be_throttled(client: Any) -> None:
    schema = client.get("/v1/schema", {"format": "json"}).json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if "401" in responses:
                assert responses["429"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path)
