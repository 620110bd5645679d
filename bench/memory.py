"""[Q1] Memory reads on a built pool: `GET /v1/bots/:id/memory` (the whole request through
DRF's test client with a real token), `context(limit=4000)` and `has_entries`.

Each figure is for one reader: how many entries they may see (`sees`: the history view of
[A1]; `active`: what active use may see [V6]), how many a call returned, how many contents it
decrypted and how many queries it ran.
"""

from dataclasses import dataclass

from rest_framework.test import APIClient

from bench.pool import BuiltPool, World
from bench.timing import Cost, Timing, cost_of, timed
from memory.access import Reader, visible_entries
from memory.selectors import context, has_entries
from openbot import services
from openbot.models import Person

CONTEXT_LIMIT = 4000
# [Q1] p50 targets in milliseconds.
TARGETS_MS = {"GET memory": 100.0, "context": 10.0, "has_entries": 5.0}


@dataclass(frozen=True)
class Row:
    pool_size: int
    reader: str
    sees: int
    active: int
    operation: str
    timing: Timing
    returned: int | None
    cost: Cost

    @property
    def target_ms(self) -> float:
        return TARGETS_MS[self.operation]

    @property
    def met(self) -> bool:
        """p50 within the target, and no decryption beyond the entries returned [Q1]."""
        within_decryptions = self.returned is None or self.cost.decryptions <= self.returned
        return self.timing.p50_ms <= self.target_ms and within_decryptions


def measure_pool(pool: BuiltPool, world: World, *, runs: int) -> list[Row]:
    """The three reads for the chosen reader and for a typical one."""
    rows: list[Row] = []
    for name, person in (("chosen", world.chosen), ("typical", world.typical)):
        rows += _measure_reader(pool, world, name, person, runs=runs)
    return rows


def _measure_reader(
    pool: BuiltPool, world: World, name: str, person: Person, *, runs: int
) -> list[Row]:
    bot = pool.bot
    organization = world.organization
    reader = Reader.person(bot=bot, person_id=person.id, organization_id=organization.id)
    sees = visible_entries(pool_id=bot.id, reader=reader, active_only=False).count()
    active = visible_entries(pool_id=bot.id, reader=reader, active_only=True).count()

    token = services.token_create(person=person, organization=organization)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    url = f"/v1/bots/{bot.id}/memory"

    def get_memory() -> int:
        response = client.get(url)
        assert response.status_code == 200, response.content
        return len(response.json()["entries"])

    returned_by_get, get_cost = cost_of(get_memory)
    assert returned_by_get == sees, (returned_by_get, sees)
    used, context_cost = cost_of(lambda: context(bot, reader, CONTEXT_LIMIT))
    found, has_cost = cost_of(lambda: has_entries(bot, reader))
    assert found == (active > 0)

    def row(operation: str, timing: Timing, returned: int | None, cost: Cost) -> Row:
        return Row(pool.size, name, sees, active, operation, timing, returned, cost)

    return [
        row("GET memory", timed(get_memory, runs=max(runs // 2, 20)), returned_by_get, get_cost),
        row(
            "context",
            timed(lambda: context(bot, reader, CONTEXT_LIMIT), runs=runs),
            len(used.entry_ids),
            context_cost,
        ),
        row("has_entries", timed(lambda: has_entries(bot, reader), runs=runs), None, has_cost),
    ]


def table(rows: list[Row]) -> str:
    """The figures as a plain-text table."""
    header = (
        f"{'pool':>8}  {'reader':<8} {'sees':>5} {'active':>6}  {'operation':<12}"
        f"{'p50 ms':>8} {'p95 ms':>8} {'runs':>5}  {'target':>7} {'met':<4}"
        f"{'returned':>9} {'decrypts':>9} {'queries':>8}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        returned = "-" if row.returned is None else str(row.returned)
        lines.append(
            f"{row.pool_size:>8,}  {row.reader:<8} {row.sees:>5} {row.active:>6}  "
            f"{row.operation:<12}{row.timing.p50_ms:>8.2f} {row.timing.p95_ms:>8.2f} "
            f"{row.timing.runs:>5}  {'≤' + format(row.target_ms, 'g'):>7} "
            f"{'yes' if row.met else 'NO':<4}"
            f"{returned:>9} {row.cost.decryptions:>9} {row.cost.queries:>8}"
        )
    return "\n".join(lines)
