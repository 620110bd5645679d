"""[B5] Task slots: at most N memory-bot tasks of a bot at once on one server.

A slot is an exclusive `flock` on one of N files under
`<OPENBOT_SLOT_DIR or tempdir/openbot-slots>/<OPENBOT_SERVER_ID>/<bot id>/<n>.lock`. The OS
releases a lock when its holder closes the file or dies, so a crashed worker never leaks a
slot, and every process (and thread) of the server sees the same slots. The files are never
deleted; their content is empty. Waiters poll; there is no queue, so waiting is not FIFO.
Lowering N lets tasks already holding higher-numbered slots finish.
"""

import fcntl
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

POLL_SECONDS = 0.02
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _path_part(name: str) -> str:
    if _SAFE_NAME.fullmatch(name) and ".." not in name:
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def slot_directory(bot_id: str) -> Path:
    """The directory of the bot's slot files on this server."""
    base = settings.OPENBOT_SLOT_DIR or Path(tempfile.gettempdir()) / ("openbot-slots")
    return Path(base) / _path_part(settings.OPENBOT_SERVER_ID) / _path_part(bot_id)


def _try_take(directory: Path, concurrency: int) -> int | None:
    for index in range(concurrency):
        fd = os.open(directory / f"{index}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        return fd
    return None


@contextmanager
def task_slot(*, bot_id: str, concurrency: int | None, deadline_at: float) -> Iterator[bool]:
    """Hold one of the bot's `concurrency` slots; yields False if none came free by
    `deadline_at` (a `time.monotonic()` value). `None` means no limit: always True at once.

    Do not nest: a task that holds a slot and asks for another can wait on itself.
    """
    if concurrency is None:
        yield True
        return
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1 (or None for no limit)")
    directory = slot_directory(bot_id)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = _try_take(directory, concurrency)
    while fd is None:
        left = deadline_at - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(POLL_SECONDS, left))
        fd = _try_take(directory, concurrency)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
