"""Read configuration from environment variables, failing loudly on a bad value."""

import os
import re

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(f"{name} must be set")
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


def env_int(name: str, default: int, *, minimum: int, unit: str = "") -> int:
    """A whole number (of `unit`), at least `minimum`."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number{unit} ({minimum} or more), got {value!r}"
        )
    return number


RATE = re.compile(r"^[1-9][0-9]{0,8}/(s|sec|m|min|h|hour|d|day)$")


def env_rate(name: str, default: str) -> str | None:
    """A rate as DRF's throttles read it ("120/min"), or None for `off`."""
    value = (env_str(name, default) or default).strip().lower()
    if value == "off":
        return None
    if not RATE.match(value):
        raise ImproperlyConfigured(
            f"{name} must be N/s, N/min, N/hour, N/day or off, got {value!r}"
        )
    return value


def env_days(name: str) -> int | None:
    """A whole number of days, at least 1; None when unset."""
    if os.environ.get(name, "") == "":
        return None
    return env_int(name, 0, minimum=1, unit=" of days")


def env_list(name: str) -> list[str]:
    value = os.environ.get(name, "")
    return [part.strip() for part in value.split(",") if part.strip()]
