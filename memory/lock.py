"""[L1] The per-bot read/write lock on a memory pool.

On PostgreSQL: transaction-scoped advisory locks, shared for reads and exclusive for changes,
so a read never mixes old rights with new contents. They are released at commit, so they are
only taken inside `transaction.atomic()`. SQLite serializes writers by itself and gives each
read transaction one snapshot, which is the same guarantee. Model calls never run under it.
"""

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

# The first key of the two-key advisory lock: "memory pool" locks of this service.
_NAMESPACE = 0x0B0A


def _key(pool_id: str) -> int:
    value = zlib.crc32(pool_id.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def _take(pool_id: str, *, exclusive: bool) -> None:
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [_NAMESPACE, _key(pool_id)])


@contextmanager
def pool_read(pool_id: str) -> Iterator[None]:
    """A transaction holding the pool's lock shared."""
    with transaction.atomic():
        _take(pool_id, exclusive=False)
        yield


@contextmanager
def pool_write(pool_id: str) -> Iterator[None]:
    """A transaction holding the pool's lock alone."""
    with transaction.atomic():
        _take(pool_id, exclusive=True)
        yield
