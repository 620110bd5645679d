"""[G1] A database that stays busy: SQLite's write lock held by a connection of its own, and
this thread's connection waiting a tenth of a second for it instead of the configured 20."""

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection


class WriteLock:
    """SQLite's write lock, held by a connection of its own until `release()`."""

    def __init__(self) -> None:
        database = str(connection.settings_dict["NAME"])
        self.holder: sqlite3.Connection | None = sqlite3.connect(
            database, isolation_level=None, check_same_thread=False
        )
        self.holder.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.holder is not None:
            self.holder.rollback()
            self.holder.close()
            self.holder = None


@contextmanager
def short_busy_timeout() -> Iterator[None]:
    """This thread's next connection gives up after 0.1 s of waiting for the write lock."""
    options: dict[str, Any] = connection.settings_dict["OPTIONS"]
    configured = options["timeout"]
    connection.close()
    options["timeout"] = 0.1
    try:
        yield
    finally:
        connection.close()
        options["timeout"] = configured


@contextmanager
def held_write_lock() -> Iterator[WriteLock]:
    """The write lock held by another connection, with a short busy timeout here."""
    with short_busy_timeout():
        lock = WriteLock()
        try:
            yield lock
        finally:
            lock.release()
