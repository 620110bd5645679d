"""[F7] Which learning messages the broker still holds, so that recovery re-sends the runs whose
message was lost (a Redis restarted without persistence, a queue deleted) at once instead of
after a lease.

Redis answers exactly: dramatiq keeps every message it has not acknowledged, waiting, delayed or
being worked on, in a hash under an id of its own for each enqueue. RabbitMQ only counts a
queue's waiting messages: while the queue and its delay queue hold any, every message counts as
held; once both are empty, none does (one a worker has taken but not finished may then be sent
again, which learning's claim makes harmless). The in-process broker looks in its queues.
"""

from collections.abc import Collection

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name


def message_key(message: dramatiq.Message) -> str:
    """What the broker keeps `message` under (Redis gives every enqueue an id of its own)."""
    return str(message.options.get("redis_message_id", message.message_id))


def messages_held(queue_name: str, keys: Collection[str]) -> set[str]:
    """Those of `keys` (`message_key`s) whose message the broker still holds in the queue."""
    if not keys:
        return set()
    broker = dramatiq.get_broker()
    names = (queue_name, dq_name(queue_name))
    if isinstance(broker, RedisBroker):
        ordered = list(keys)
        with broker.client.pipeline(transaction=False) as pipe:
            for key in ordered:
                for name in names:
                    pipe.hexists(f"{broker.namespace}:{name}.msgs", key)
            found = pipe.execute()
        return {key for n, key in enumerate(ordered) if any(found[2 * n : 2 * n + 2])}
    if isinstance(broker, RabbitmqBroker):
        waiting, delayed, _ = broker.get_queue_message_counts(queue_name)
        return set(keys) if waiting + delayed else set()
    if isinstance(broker, StubBroker):
        held: set[str] = set()
        for name in names:
            queue = broker.queues.get(name)
            if queue is not None:
                with queue.mutex:
                    bodies = list(queue.queue)
                held |= {dramatiq.Message.decode(body).message_id for body in bodies}
        return held & set(keys)
    return set(keys)  # a broker this module does not know: as before, wait out the lease
