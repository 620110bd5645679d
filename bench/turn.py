"""[Q2] The memory overhead of a turn: enrichment without the model's own time.

A turn's memory work is `memorybot.enrichment.enrich_input`: the memory bot's terms for the
chat, the readers of the answer, `context(limit=4000)` (which also answers [S2]), the recorded
model call (budget check, encrypted request and result), `validate_references` and the stored,
encrypted enrichment. The model is the built-in offline provider, whose own time is near zero; it is
timed on its own and subtracted per turn, so `overhead` is what memory adds to a turn whatever
model runs. Every timed turn really is enriched (the input shares words with the entries).

Each run starts a new turn (not timed) in a chat and times `enrich_input` on its input. Rows:
`private`, a private chat of the [Q1] chosen reader (who sees about 1,000 entries: their own and
their channels'); `group`, a group chat of one of their channels (only the group's and
everyone's entries); `typical`, a private chat of a typical reader of that pool.

Run `python -m bench.turn [--runs 200] [--fresh]` (or `python -m bench --turn`); the database
is chosen as for `python -m bench`. The pool is the 10,000-entry [Q1] pool of `bench.pool`,
reused when an earlier run built it.
"""

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from unittest import mock

from bench.timing import Cost, Timing, cost_of, percentiles

if TYPE_CHECKING:  # bench.pool needs Django set up first
    from bench.pool import BuiltPool, World

TARGET_MS = 20.0
POOL_SIZE = 10_000
INPUT = "Did the release slip again, and when does the new office open?"


# The parts of `enrich_input` timed inside each turn: (module, attribute, name).
PARTS = (
    ("memorybot.enrichment", "context", "context"),
    ("memorybot.duty", "model_call", "model call"),
    ("memorybot.enrichment", "validate_references", "validate_references"),
)


@dataclass(frozen=True)
class TurnRow:
    chat: str
    runs: int
    enriched: int
    entries_used: int
    total: Timing
    model: Timing
    overhead: Timing
    cost: Cost
    # p50/p95 of each part within the same turns; "model call" excludes the model itself.
    parts: dict[str, Timing]

    @property
    def met(self) -> bool:
        return self.overhead.p50_ms <= TARGET_MS


class Stopwatch:
    """Times the offline model and the parts of `enrich_input` within each turn.

    Instrumentation only: every wrapped function still runs and answers as always.
    """

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._patches: list[Any] = []

    def reset(self) -> None:
        self.spent = {"model": 0.0} | {name: 0.0 for _, _, name in PARTS}

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[name] += (time.perf_counter() - started) * 1000

        return timed_call

    def __enter__(self) -> "Stopwatch":
        import importlib

        from memorybot.providers import OfflineProvider

        self.reset()
        self._patches = [
            mock.patch.object(
                OfflineProvider, "complete", self._wrap("model", OfflineProvider.complete)
            )
        ]
        for module_name, attribute, name in PARTS:
            module = importlib.import_module(module_name)
            self._patches.append(
                mock.patch.object(module, attribute, self._wrap(name, getattr(module, attribute)))
            )
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for patch in reversed(self._patches):
            patch.stop()


def measure_chat(name: str, chat_id: str, *, runs: int, warmup: int = 5) -> TurnRow:
    """Time `enrich_input` on `runs` new turns of the chat, after `warmup` untimed ones."""
    from chats.models import Chat, Item
    from chats.services import turn_start
    from memorybot.enrichment import enrich_input
    from memorybot.models import Enrichment

    chat = Chat.objects.select_related("bot", "organization").get(pk=chat_id)
    person = chat.owner

    def new_turn() -> Callable[[], str]:
        turn = turn_start(chat=chat, person=person, text=INPUT)
        item = Item.objects.get(chat=chat, seq=turn.input_seq)
        return lambda: enrich_input(turn=turn, item=item)

    for _ in range(warmup):
        new_turn()()
    text, cost = cost_of(new_turn())
    assert text != INPUT, "the benchmark input must be enriched"
    totals: list[float] = []
    spent: dict[str, list[float]] = {}
    enriched = 0
    before = Enrichment.objects.filter(chat=chat).count()
    with Stopwatch() as stopwatch:
        for _ in range(runs):
            enrich = new_turn()
            stopwatch.reset()
            started = time.perf_counter()
            result = enrich()
            totals.append((time.perf_counter() - started) * 1000)
            # The recorded call's own work: what model_call took beyond the model.
            stopwatch.spent["model call"] -= stopwatch.spent["model"]
            for part, value in stopwatch.spent.items():
                spent.setdefault(part, []).append(value)
            enriched += result != INPUT
    newest = Enrichment.objects.filter(chat=chat).order_by("-id").first()
    assert Enrichment.objects.filter(chat=chat).count() - before == enriched
    models = spent.pop("model")
    overheads = [total - model for total, model in zip(totals, models, strict=True)]
    rest = [
        overhead - sum(values[index] for values in spent.values())
        for index, overhead in enumerate(overheads)
    ]
    return TurnRow(
        chat=name,
        runs=runs,
        enriched=enriched,
        entries_used=len(newest.entry_ids) if newest else 0,
        total=percentiles(totals),
        model=percentiles(models),
        overhead=percentiles(overheads),
        cost=cost,
        parts={part: percentiles(values) for part, values in spent.items()}
        | {"rest": percentiles(rest)},
    )


def turn_scene(world: "World", pool: "BuiltPool") -> dict[str, str]:
    """The offline memory bot for the bench organization, and the chats (by row name): the
    chosen reader's private chat and a group chat of their first channel, and a typical
    reader's private chat."""
    from chats.services import chat_create
    from openbot import services
    from openbot.access import Caller

    services.organization_settings_update(
        organization=world.organization, bot_memory=True, bot_memory_model="offline:extractive"
    )
    chosen = Caller(person=world.chosen, organization=world.organization)
    typical = Caller(person=world.typical, organization=world.organization)
    chats = {
        "private": chat_create(caller=chosen, bot_id=pool.bot.id, channel_id=None, test=False),
        "group": chat_create(
            caller=chosen, bot_id=pool.bot.id, channel_id=world.chosen_channel_ids[0], test=False
        ),
        "typical": chat_create(caller=typical, bot_id=pool.bot.id, channel_id=None, test=False),
    }
    return {name: chat.id for name, chat in chats.items()}


def measure(world: "World", pool: "BuiltPool", *, runs: int) -> list[TurnRow]:
    return [
        measure_chat(name, chat_id, runs=runs) for name, chat_id in turn_scene(world, pool).items()
    ]


def table(rows: list[TurnRow]) -> str:
    """The figures as a plain-text table (milliseconds)."""
    header = (
        f"{'chat':<8} {'runs':>5} {'enriched':>8} {'used':>5}  "
        f"{'total p50':>9} {'p95':>7}  {'model p50':>9} {'p95':>7}  "
        f"{'overhead p50':>12} {'p95':>7}  {'target':>7} {'met':<4}"
        f"{'decrypts':>9} {'queries':>8}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row.chat:<8} {row.runs:>5} {row.enriched:>8} {row.entries_used:>5}  "
            f"{row.total.p50_ms:>9.2f} {row.total.p95_ms:>7.2f}  "
            f"{row.model.p50_ms:>9.2f} {row.model.p95_ms:>7.2f}  "
            f"{row.overhead.p50_ms:>12.2f} {row.overhead.p95_ms:>7.2f}  "
            f"{'≤' + format(TARGET_MS, 'g'):>7} {'yes' if row.met else 'NO':<4}"
            f"{row.cost.decryptions:>9} {row.cost.queries:>8}"
        )
    names = list(rows[0].parts) if rows else []
    lines += ["", "within the same turns, p50 / p95 ms of each part of the overhead:"]
    lines.append(f"{'chat':<8} " + " ".join(f"{name:>21}" for name in names))
    for row in rows:
        cells = " ".join(
            f"{row.parts[name].p50_ms:>12.2f} / {row.parts[name].p95_ms:>6.2f}" for name in names
        )
        lines.append(f"{row.chat:<8} {cells}")
    lines.append(
        "(model call: budget check and the encrypted call record; rest: the memory bot's "
        "terms, the readers, the stored enrichment)"
    )
    return "\n".join(lines)


def run(*, runs: int, fresh: bool = False) -> bool:
    """Reuse (or build) the world and the 10k pool, print the [Q2] figures; whether met.

    Unlike `python -m bench`, an existing world is kept unless `fresh`: rebuilding it would
    also delete the larger [Q1] pools of that world."""
    from bench import pool as bench_pool

    world = None if fresh else bench_pool.world_find()
    if world is None:
        bench_pool.world_remove()
        world = bench_pool.world_build()
        print(f"built the world ({bench_pool.PEOPLE} people, {bench_pool.CHANNELS} channels)")
    built = bench_pool.pool_find(world, POOL_SIZE)
    if built is None:
        built = bench_pool.pool_build(world, size=POOL_SIZE)
        print(f"built the {POOL_SIZE:,}-entry pool in {built.build_seconds:.1f} s")
    else:
        print(f"reused the {POOL_SIZE:,}-entry pool")
    rows = measure(world, built, runs=runs)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print()
    print(f"load average when done: {load} on {os.cpu_count()} CPUs")
    print(f"[Q2] turn overhead of memory: enrich_input on a {POOL_SIZE:,}-entry pool")
    print(table(rows))
    print("overhead = enrich_input minus the offline model's own time, per turn")
    return all(row.met for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turn", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="timed turns per chat")
    parser.add_argument(
        "--fresh", action="store_true", help="rebuild the bench world and pools from scratch"
    )
    args = parser.parse_args(argv)
    setup()

    from django.db import connection
    from django.test.utils import override_settings

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}, runs: {args.runs}")
    # One INFO line per model call would time the terminal, not the turn.
    logging.getLogger("memorybot.gateway").setLevel(logging.WARNING)
    # Production runs without DEBUG; with it every query would also be logged and timed.
    with override_settings(DEBUG=False):
        met = run(runs=args.runs, fresh=args.fresh)
    return 0 if met else 1


def setup() -> None:
    """Django on the bench database (created if missing), migrated; as `python -m bench`."""
    from bench.__main__ import environment

    environment()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


if __name__ == "__main__":
    sys.exit(main())
