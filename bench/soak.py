"""[Q3] Readers and writers together: 8 readers and learning-style writers for 60 s on the
10,000-entry pool of `bench.pool`; counts errors and reads that showed an entry whose source
access was revoked before the read began.

Each writer repeatedly takes a person out of one of their channels (committed), then writes a
new group fact for that channel — new content under new rights — and after a pause puts the
person back. Each reader reads `GET memory`'s selector as one of those people. A read that
began after a revocation committed and ended before the person was put back must show no
entry that depends on that channel's evidence (the entry itself or any source, through the
closure). Entries the soak wrote carry `chat:bench-soak` and are purged at the end, so the
pool is as before.

Run `python -m bench.soak [--seconds 60] [--readers 8] [--writers 2]`; the database is chosen
as for `python -m bench`.
"""

import argparse
import random
import statistics
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field

SOAK_CHAT = "bench-soak"


@dataclass
class Revocation:
    person_id: str
    channel_id: str
    revoked_at: float
    restored_at: float | None = None


@dataclass
class Soak:
    """What the threads share; every list is appended under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    revocations: list[Revocation] = field(default_factory=list)
    busy: set[tuple[str, str]] = field(default_factory=set)
    read_ms: list[float] = field(default_factory=list)
    checked: int = 0
    violations: int = 0
    writes: int = 0
    errors: list[str] = field(default_factory=list)

    def revoked_during(self, person_id: str, started: float, ended: float) -> set[str]:
        """Channels taken from the person before `started` and not given back by `ended`."""
        with self.lock:
            return {
                revocation.channel_id
                for revocation in self.revocations
                if revocation.person_id == person_id
                and revocation.revoked_at < started
                and (revocation.restored_at is None or revocation.restored_at > ended)
            }


def _reader(soak: Soak, pool_id: str, bot_id: str, org_id: str, people: list[str], until: float):
    from django.db import connection

    from memory.access import Reader
    from memory.models import Closure, Evidence
    from memory.selectors import entries_for_reader
    from openbot.models import Bot

    bot = Bot.objects.get(id=bot_id)
    rng = random.Random()
    try:
        while time.monotonic() < until:
            with soak.lock:  # half the reads by someone who just lost a channel
                losing = [person for person, _ in soak.busy]
            person_id = rng.choice(losing if losing and rng.random() < 0.5 else people)
            started = time.monotonic()
            # As the memory route reads: the rights are the listing's own business [L1].
            reader = Reader(organization_id=org_id, person_id=person_id, bot=bot)
            entries, _ = entries_for_reader(pool_id=pool_id, reader=reader, tags=[])
            ended = time.monotonic()
            revoked = soak.revoked_during(person_id, started, ended)
            leaked = 0
            if revoked:
                ids = [entry["id"] for entry in entries]
                ancestors = Closure.objects.filter(entry_id__in=ids).values("ancestor_id")
                leaked = Evidence.objects.filter(
                    entry_id__in=ancestors,
                    rule__in=[f"channel:{channel}" for channel in revoked],
                ).count()
            with soak.lock:
                soak.read_ms.append((ended - started) * 1000)
                soak.checked += bool(revoked)
                soak.violations += bool(leaked)
    except Exception:
        with soak.lock:
            soak.errors.append(traceback.format_exc(limit=3))
    finally:
        connection.close()


def _writer(soak: Soak, pool_id: str, org_id: str, pairs: list[tuple[str, str]], until: float):
    from django.db import connection

    from memory.services import ItemEvidence, entry_create_in, pool_change
    from openbot.models import Channel, Person
    from openbot.services import channel_member_add, channel_member_remove

    rng = random.Random()
    try:
        while time.monotonic() < until:
            with soak.lock:
                free = [pair for pair in pairs if pair not in soak.busy]
                if not free:
                    continue
                pair = rng.choice(free)
                soak.busy.add(pair)
            person_id, channel_id = pair
            channel, person = Channel.objects.get(id=channel_id), Person.objects.get(id=person_id)
            channel_member_remove(channel=channel, person=person)
            revocation = Revocation(person_id, channel_id, revoked_at=time.monotonic())
            with soak.lock:
                soak.revocations.append(revocation)
            with pool_change(pool_id=pool_id, by="memory_bot") as change:
                entry_create_in(
                    change,
                    layer="fact",
                    content=f"the channel decided something at {time.time():.3f}",
                    tags=[
                        f"for:channel:{channel_id}",
                        f"org:{org_id}",
                        f"chat:{SOAK_CHAT}",
                        f"channel:{channel_id}",
                    ],
                    source_items=[(SOAK_CHAT, 1)],
                    evidence=[ItemEvidence(SOAK_CHAT, 1, f"channel:{channel_id}", org_id)],
                )
            with soak.lock:
                soak.writes += 1
            time.sleep(rng.uniform(0.1, 0.5))
            with soak.lock:
                revocation.restored_at = time.monotonic()
            channel_member_add(channel=channel, person=person)
            with soak.lock:
                soak.busy.discard(pair)
    except Exception:
        with soak.lock:
            soak.errors.append(traceback.format_exc(limit=3))
    finally:
        connection.close()


def run(*, seconds: float, readers: int, writers: int) -> bool:
    from bench import pool as bench_pool
    from memory.forgetting import pool_purge

    world = bench_pool.world_find() or bench_pool.world_build()
    built = bench_pool.pool_find(world, 10_000) or bench_pool.pool_build(world, size=10_000)
    people = [person.id for person in world.people[:60] if world.channels_of[person.id]]
    pairs = [
        (person_id, channel) for person_id in people for channel in world.channels_of[person_id]
    ]
    soak = Soak()
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=_reader,
            args=(soak, built.bot.id, built.bot.id, world.organization.id, people, until),
        )
        for _ in range(readers)
    ] + [
        threading.Thread(
            target=_writer, args=(soak, built.bot.id, world.organization.id, pairs, until)
        )
        for _ in range(writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    removed = pool_purge(pool_id=built.bot.id, tag=f"chat:{SOAK_CHAT}")
    reads = len(soak.read_ms)
    print(f"[Q3] {readers} readers + {writers} writers for {seconds:.0f} s on the 10,000 pool")
    print(
        f"reads: {reads}  (p50 {statistics.median(soak.read_ms):.1f} ms, p95 "
        f"{statistics.quantiles(soak.read_ms, n=20)[-1]:.1f} ms)"
        if reads > 1
        else "reads: 0"
    )
    print(
        f"writes: {soak.writes} new entries, {len(soak.revocations)} revocations "
        f"(purged afterwards: {removed})"
    )
    print(f"reads that began after a revocation they were checked against: {soak.checked}")
    print(
        f"reads showing an entry whose source access was revoked before they began: "
        f"{soak.violations}"
    )
    print(f"errors: {len(soak.errors)}")
    for error in soak.errors[:3]:
        print(error)
    return not soak.errors and soak.violations == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--writers", type=int, default=2)
    args = parser.parse_args(argv)

    from bench.turn import setup

    setup()
    from django.test.utils import override_settings

    with override_settings(DEBUG=False):
        ok = run(seconds=args.seconds, readers=args.readers, writers=args.writers)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
