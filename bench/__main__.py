"""`python -m bench`: build the [Q1] pools on PostgreSQL and print the memory-read figures
(`--lock`: the [L2] lock holds and reader waits, bench.lock; `--turn`: [Q2], bench.turn;
`--floor`: [Q4] the hot paths next to their floor, in-process and over HTTP, bench.floor;
`--recall`: [R5] recall@k per kind and ranker, bench.recall_dialogs, and [R4] search cost
by pool size, bench.recall; `--learning`: [K1] what learning
keeps from written chats, per model, bench.learning).

DATABASE_URL names the database (default: the `bench` database on the local PostgreSQL, which
is created if missing); DJANGO_SETTINGS_MODULE defaults to `settings.dev`. A run deletes the
previous run's bench organization and builds everything again, unless `--reuse` finds pools of
the requested sizes.
"""

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dj_database_url

if TYPE_CHECKING:
    import psycopg

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/bench"


@contextmanager
def maintenance(url: str) -> Iterator[tuple["psycopg.Connection[Any]", str]]:
    """An autocommit connection to the `postgres` database of the server `url` names, and the
    name of the database `url` names."""
    import psycopg

    config = dj_database_url.parse(url)
    with psycopg.connect(
        dbname="postgres",
        host=config.get("HOST") or None,
        port=config.get("PORT") or None,
        user=config.get("USER") or None,
        password=config.get("PASSWORD") or None,
        autocommit=True,
    ) as admin:
        yield admin, str(config["NAME"])


def database_ensure(url: str) -> None:
    """Create the PostgreSQL database `url` names if it does not exist yet."""
    if dj_database_url.parse(url)["ENGINE"] != "django.db.backends.postgresql":
        return
    from psycopg import sql

    with maintenance(url) as (admin, name):
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def environment() -> None:
    """The bench's settings (`settings.dev`), on the bench database (created if missing),
    without the rate limits: a bench calls faster than any person, and the limits would
    measure themselves [T1]."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings.dev")
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    for limit in ("TOKEN", "WRITES", "AUTH_FAILURES"):
        os.environ.setdefault(f"OPENBOT_THROTTLE_{limit}", "off")
    database_ensure(os.environ["DATABASE_URL"])


def database_recreate(url: str) -> None:
    """Drop and create the PostgreSQL database `url` names, so a run starts from nothing."""
    from psycopg import sql

    with maintenance(url) as (admin, name):
        identifier = sql.Identifier(name)
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(identifier))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(identifier))


def run(*, sizes: list[int], runs: int, reuse: bool) -> bool:
    """Build (or reuse) the world and pools, print the figures; whether the chosen reader's
    figures meet the targets."""
    from bench import memory, pool

    world = pool.world_find() if reuse else None
    if world is None:
        started = time.perf_counter()
        pool.world_remove()
        world = pool.world_build()
        seconds = time.perf_counter() - started
        print(
            f"built the world ({pool.PEOPLE} people, {pool.CHANNELS} channels) in {seconds:.1f} s"
        )
    built = []
    for size in sizes:
        found = pool.pool_find(world, size) if reuse else None
        if found is None:
            found = pool.pool_build(world, size=size)
            print(f"built the {size:,}-entry pool in {found.build_seconds:.1f} s")
        else:
            print(f"reused the {size:,}-entry pool")
        built.append(found)
    rows = [
        row for built_pool in built for row in memory.measure_pool(built_pool, world, runs=runs)
    ]
    print()
    print(memory.table(rows))
    return all(row.met for row in rows if row.reader == "chosen")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--sizes",
        default=None,
        help="pool sizes, comma-separated (default 10000,100000; 1000,10000,100000 with --recall)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="timed calls per figure (default 200, half for GET memory; 30 with --lock)",
    )
    parser.add_argument("--reuse", action="store_true", help="reuse pools of an earlier run")
    parser.add_argument(
        "--turn", action="store_true", help="measure the [Q2] turn overhead instead (bench.turn)"
    )
    parser.add_argument(
        "--lock",
        action="store_true",
        help="measure the [L2] lock holds and reader waits instead (bench.lock)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="measure the [Q4] hot paths next to their floor instead (bench.floor)",
    )
    parser.add_argument(
        "--recall",
        action="store_true",
        help="measure [R5] recall@k per kind of question and ranker on written conversations,"
        " and [R4] search cost by pool size, instead (bench.recall_dialogs, bench.recall;"
        " --sizes '' for the conversations alone)",
    )
    parser.add_argument(
        "--learning",
        action="store_true",
        help="measure [K1] what learning keeps from written chats instead (bench.learning; "
        "with --quick and --model, see python -m bench.learning --help)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.learning:
        from bench import learning

        return learning.main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.turn:
        from bench import turn

        return turn.main(["--runs", str(args.runs or 200)])

    environment()

    import django

    django.setup()

    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import override_settings

    call_command("migrate", verbosity=0)
    runs = args.runs or (30 if args.lock else 200)
    if args.sizes is not None:
        sizes = args.sizes
    else:
        sizes = "1000,10000,100000" if args.recall else "10000,100000"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"database: {connection.vendor} {connection.settings_dict['NAME']}; "
        f"{os.cpu_count()} CPUs, load average {load}; timed calls per figure: {runs}"
    )
    # Production runs without DEBUG; with it every query would also be logged and timed.
    with override_settings(DEBUG=False):
        if args.floor:
            from bench import floor

            floor.run(sizes=[int(size) for size in sizes.split(",")], runs=runs, reuse=args.reuse)
            met = True
        elif args.lock:
            from bench import lock

            met = lock.run(size=int(sizes.split(",")[-1]), runs=runs, reuse=args.reuse)
        elif args.recall:
            from bench import recall

            met = recall.run(
                sizes=[int(size) for size in sizes.split(",") if size], runs=runs, reuse=args.reuse
            )
        else:
            met = run(sizes=[int(size) for size in sizes.split(",")], runs=runs, reuse=args.reuse)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
