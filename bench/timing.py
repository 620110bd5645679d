"""Repeat a call and report percentiles; count the queries and decryptions of one call."""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from unittest import mock

from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext

from openbot import fields

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    p50_ms: float
    p95_ms: float
    runs: int


@dataclass(frozen=True)
class Cost:
    """What one call did: database queries and content decryptions [V8, Q1]."""

    queries: int
    decryptions: int


def timed(call: Callable[[], object], *, runs: int, warmup: int = 5) -> Timing:
    """Median and 95th percentile of `runs` calls, after `warmup` calls that are not counted."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    percentiles = statistics.quantiles(samples, n=100, method="inclusive")
    return Timing(p50_ms=statistics.median(samples), p95_ms=percentiles[94], runs=runs)


def cost_of(call: Callable[[], T]) -> tuple[T, Cost]:
    """Run `call` once, counting its queries and every token `decrypt_all` is given (every
    decryption goes through it)."""
    reset_queries()
    with (
        mock.patch.object(fields, "decrypt_all", side_effect=fields.decrypt_all) as decrypt_all,
        CaptureQueriesContext(connection) as queries,
    ):
        result = call()
    decryptions = sum(len(tokens) for (tokens,), _ in decrypt_all.call_args_list)
    return result, Cost(queries=len(queries), decryptions=decryptions)
