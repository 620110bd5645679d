"""[L1] The per-bot read/write lock on a memory pool.

On PostgreSQL: transaction-scoped advisory locks, shared for reads and exclusive for changes,
so a read never mixes old rights with new contents. They are released at commit, so they are
taken inside `transaction.atomic()`, or by a read of one statement for that statement
(`shared_in_statement`). SQLite serializes writers by itself and gives each read transaction
one snapshot, which is the same guarantee. Model calls never run under it.
"""

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import BooleanField, Value
from django.db.models.expressions import RawSQL

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


def pool_key(pool_id: str) -> str:
    """The pool's key as `shared_in_statement` takes it."""
    return str(_key(pool_id))


def shared_in_statement(key: str) -> Value | RawSQL:
    """A column that takes the pool's lock shared unless a change holds it, and tells
    whether it did; `key` is `pool_key` or a compiled query's stand-in for it.

    For a read of one statement. Its one snapshot is what keeps old rights from mixing with
    new contents, as long as it reads the rights there too (`memory.rights.rights_seen`); the
    lock only makes it wait for a change under way, as `pool_read` does: if it could not take
    the lock, the read is done again under `pool_read`. The lock is taken after the snapshot,
    so a change that commits in between leaves the read the state before it, which is
    consistent too. It is held to the end of the statement's transaction. SQLite has no lock to
    take: true (its statement reads the last commit in WAL mode; `pool_read` there begins
    IMMEDIATE and so waits for a writer).
    """
    if connection.vendor != "postgresql":
        return Value(True)
    # Only the namespace, a constant, is put into the SQL.
    return RawSQL(  # noqa: S611
        f"SELECT pg_try_advisory_xact_lock_shared({_NAMESPACE}, CAST(%s AS integer))",
        (key,),
        output_field=BooleanField(),
    )


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
