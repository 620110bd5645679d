"""[G1] SQLite with the writers of one process in line.

The embedded setup serves requests and runs the in-process worker as threads of one process,
and SQLite lets one transaction write at a time (every transaction begins IMMEDIATE). Left to
SQLite, a waiting writer sleeps and polls, a little longer each time: the database stands idle
while waiters sleep, and the newest waiter, polling fastest, tends to win — under load some
transactions (a learning run's, as often as not) wait past the busy timeout. Here a thread
waits for a lock of the process before it begins a transaction, and the one that commits hands
the database straight to the next. A thread that waited the whole busy timeout for it tries
SQLite anyway, whose own timeout then decides (503 on a busy database, openbot/errors.py).
"""

import threading
from typing import Any

from django.db.backends.sqlite3 import base

# One lock per database file, for every connection of this process.
_writers: dict[str, threading.Lock] = {}
_writers_guard = threading.Lock()


def _writer(name: str) -> threading.Lock:
    with _writers_guard:
        return _writers.setdefault(name, threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    # The type stubs leave out the private methods overridden here (`type: ignore[misc]`).
    _holds_writer = False

    def _start_transaction_under_autocommit(self) -> None:
        writer = _writer(str(self.settings_dict["NAME"]))
        timeout = float(self.settings_dict["OPTIONS"].get("timeout", 5))
        self._holds_writer = writer.acquire(timeout=timeout)
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._release_writer()
            raise

    def _release_writer(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            _writer(str(self.settings_dict["NAME"])).release()

    def _commit(self) -> Any:
        try:
            return super()._commit()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _rollback(self) -> Any:
        try:
            return super()._rollback()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _close(self) -> Any:
        try:
            return super()._close()  # type: ignore[misc]
        finally:
            self._release_writer()
