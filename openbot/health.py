"""[F8] Whether this process can serve: its database and its broker answer."""

import copy

import dramatiq
import pika
import pika.connection
import pika.exceptions
import redis
from django.db import DatabaseError, connection
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker

# How long a check waits for the broker, within the few seconds an orchestrator's probe allows.
BROKER_TIMEOUT_S = 2.0


def database_ready() -> bool:
    """The database answers `SELECT 1`."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return False
    return True


def broker_ready(broker: dramatiq.Broker) -> bool:
    """Redis answers a PING, RabbitMQ opens a connection, each on a connection of the check's
    own with a short timeout; a broker inside this process (the StubBroker) is always ready."""
    if isinstance(broker, RedisBroker):
        return _redis_ready(broker.client.connection_pool)
    if isinstance(broker, RabbitmqBroker):
        configured = broker.parameters
        return _rabbitmq_ready(configured if isinstance(configured, list) else [configured])
    return True


def _redis_ready(pool: redis.ConnectionPool) -> bool:
    timeouts = {"socket_connect_timeout": BROKER_TIMEOUT_S, "socket_timeout": BROKER_TIMEOUT_S}
    quick = redis.ConnectionPool(
        connection_class=pool.connection_class, **{**pool.connection_kwargs, **timeouts}
    )
    try:
        return bool(redis.Redis(connection_pool=quick).ping())
    except redis.RedisError:
        return False
    finally:
        quick.disconnect()


def _rabbitmq_ready(configured: list[pika.connection.Parameters]) -> bool:
    attempts = []
    for parameters in configured:
        attempt = copy.copy(parameters)
        attempt.connection_attempts = 1
        attempt.socket_timeout = attempt.stack_timeout = BROKER_TIMEOUT_S
        attempts.append(attempt)
    try:
        pika.BlockingConnection(attempts).close()
    except pika.exceptions.AMQPError:
        return False
    return True


def unready_dependencies() -> list[str]:
    """What this process needs and cannot reach now: "database", "broker"."""
    checks = (("database", database_ready), ("broker", lambda: broker_ready(dramatiq.get_broker())))
    return [name for name, ready in checks if not ready()]
