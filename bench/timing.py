"""Repeat a call and report percentiles; count the queries and decryptions of one call."""

import statistics
import time
from collections.abc import Callable, Sequence
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
    [timing] = timed_in_turn([call], runs=runs, warmup=warmup)
    return timing


def timed_in_turn(
    calls: Sequence[Callable[[], object]], *, runs: int, warmup: int = 5
) -> list[Timing]:
    """`timed` of each of `calls`, the calls taking turns (one of each, `runs` times): every
    figure is then taken over the same moments of a noisy machine, and how two of them differ
    is not how the machine drifted between them."""
    for _ in range(warmup):
        for call in calls:
            call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(runs):
        for call, taken in zip(calls, samples, strict=True):
            started = time.perf_counter()
            call()
            taken.append((time.perf_counter() - started) * 1000)
    return [percentiles(taken) for taken in samples]


def percentiles(samples: list[float]) -> Timing:
    """Median and 95th percentile of `samples` (ms)."""
    quantiles = statistics.quantiles(samples, n=100, method="inclusive")
    return Timing(p50_ms=statistics.median(samples), p95_ms=quantiles[94], runs=len(samples))


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
