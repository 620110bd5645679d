"""[F8] The health endpoints: `/healthz` says the process serves without asking the database;
`/readyz` says whether the database and the broker answer, and names only which does not.
No token, and not part of the API's schema. (The database unreachable: test_outage.py.)"""

import logging
import socket
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from django.test import Client
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from rest_framework.test import APIClient

from openbot.health import broker_ready


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def broker_gone() -> Iterator[None]:
    """The process's broker is a Redis that does not answer."""
    configured = dramatiq.get_broker()
    dramatiq.set_broker(RedisBroker(url=f"redis://127.0.0.1:{closed_port()}/0"))
    try:
        yield
    finally:
        dramatiq.set_broker(configured)


def test_healthz_answers_without_the_database(anon: APIClient) -> None:
    """No `db` fixture: pytest-django refuses any database access in this test."""
    response = anon.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_answers_ready_without_a_token(anon: APIClient, db: Any) -> None:
    response = anon.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


def test_readyz_names_the_broker_that_does_not_answer(
    anon: APIClient, db: Any, broker_gone: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        response = anon.get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {"error": {"code": "unavailable", "message": "broker unreachable"}}
    assert caplog.records == []  # the probe's answer, not an error of this server


def test_a_broker_that_does_not_answer_is_not_ready() -> None:
    port = closed_port()
    assert not broker_ready(RedisBroker(url=f"redis://127.0.0.1:{port}/0"))
    assert not broker_ready(RabbitmqBroker(url=f"amqp://guest:guest@127.0.0.1:{port}/%2F"))
    assert broker_ready(StubBroker())


@pytest.mark.skipif(not listening(6379), reason="needs Redis on 127.0.0.1")
def test_redis_that_answers_is_ready() -> None:
    assert broker_ready(RedisBroker(url="redis://127.0.0.1:6379/0"))


@pytest.mark.skipif(not listening(5672), reason="needs RabbitMQ on 127.0.0.1")
def test_rabbitmq_that_answers_is_ready() -> None:
    assert broker_ready(RabbitmqBroker(url="amqp://guest:guest@127.0.0.1:5672/%2F"))


def test_the_probes_are_not_in_the_api_schema(db: Any) -> None:
    paths = Client().get("/v1/schema?format=json").json()["paths"]
    assert not [path for path in paths if not path.startswith("/v1/")]
    # Operations keep their tags by the segment after /v1, as before the probes were added.
    tags = {
        tag for path in paths.values() for operation in path.values() for tag in operation["tags"]
    }
    assert tags == {"bots", "chats", "me", "organizations"}
