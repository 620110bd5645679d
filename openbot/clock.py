"""Time as the API shows it: milliseconds since the epoch [E1]."""

import time
from datetime import UTC, datetime


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def day_of(ms: int) -> str:
    """The UTC day of `ms` as models are shown it: `2026-05-08`."""
    return datetime.fromtimestamp(ms / 1000, UTC).date().isoformat()
