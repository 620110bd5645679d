"""Time as the API shows it: milliseconds since the epoch [E1]."""

import time
from datetime import datetime


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
