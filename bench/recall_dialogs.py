"""[R5] Recall on written conversations (bench.dialogs): how often each ranker puts a question's
evidence among its first 1, 5 and 10, per kind of question, and what the search route's ranker
costs over HTTP on a pool without planner statistics and on an analyzed one [R7].

Each conversation is a pool of its own; every turn is one memory of the world's chosen person,
private to them, written at the turn's time (the reader sees every turn of the conversation,
about 540). A question with two evidence turns (multi-hop) counts the share of them found.
Rankers: `recent` (memory order, what context offers without a query), `bm25` (the term
index alone, memory.relevance), `dense` (meaning alone) and `hybrid` (both fused: what search,
`context(query=)` and `recall: relevant` use).
"""

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice

from rest_framework.test import APIClient

from bench import pool as bench_pool
from bench.dialogs import KINDS, Conversation, conversations
from bench.timing import Timing, timed_in_turn
from memory.access import Reader, visible_in_order
from memory.lock import pool_read
from memory.models import Entry, EntryVector
from memory.relevance import meaning_ranked, ranked
from memory.rows import ENTRY_FIELDS
from memory.search import search
from memory.services import ImportedEntry, ItemEvidence, entries_import
from memory.terms import query_terms
from memory.vectors import vectors_fill
from openbot import ids, services
from openbot.fields import readable_values
from openbot.models import Bot, Organization, Person

Ranker = Callable[[Bot, Reader, str], list[str]]
TOP = 10


def _recent(bot: Bot, reader: Reader, text: str) -> list[str]:
    with pool_read(bot.id):
        order = visible_in_order(pool_id=bot.id, reader=reader, active_only=True)
        return [entry_id for entry_id, _ in islice(order, TOP)]


def _bm25(bot: Bot, reader: Reader, text: str) -> list[str]:
    with pool_read(bot.id):
        found = ranked(pool_id=bot.id, reader=reader, terms=query_terms(text), limit=TOP)
    return [entry_id for entry_id, _ in found]


def _dense(bot: Bot, reader: Reader, text: str) -> list[str]:
    with pool_read(bot.id):
        found = meaning_ranked(pool_id=bot.id, reader=reader, query=text)
    return [entry_id for entry_id, _ in found[:TOP]]


def _hybrid(bot: Bot, reader: Reader, text: str) -> list[str]:
    return [entry["id"] for entry in search(bot, reader, text, TOP)[0]]


RANKERS: dict[str, Ranker] = {
    "recent": _recent,
    "bm25": _bm25,
    "dense": _dense,
    "hybrid": _hybrid,
}


@dataclass(frozen=True)
class Built:
    bot: Bot
    conversation: Conversation
    # The entry of each turn, in turn order.
    entry_ids: list[str]


def pool_reused(world: bench_pool.World, index: int, conversation: Conversation) -> Built | None:
    """The pool an earlier run built for the conversation, if it holds its turns, each with
    its vector."""
    bot = Bot.objects.filter(organization=world.organization, name=f"recall-dialog-{index}").first()
    if bot is None or EntryVector.objects.filter(bot_id=bot.id).count() != len(conversation.turns):
        return None
    rows = readable_values(Entry.objects.filter(bot=bot).order_by("updated_at"), "id", "content")
    if [row["content"] for row in rows] != [turn.content for turn in conversation.turns]:
        return None
    return Built(bot, conversation, [row["id"] for row in rows])


def pool_build(world: bench_pool.World, index: int, conversation: Conversation) -> Built:
    name = f"recall-dialog-{index}"
    Bot.objects.filter(organization=world.organization, name=name).delete()
    bot = services.bot_create(organization=world.organization, name=name)
    services.grant_set(bot=bot, level="read", organization=world.organization)
    person, org = world.chosen.id, world.organization.id
    chat = ids.new_id("chat")
    audience = f"person:{person}"
    entries = [
        ImportedEntry(
            id=ids.new_id("mem"),
            layer=Entry.Layer.FACT,
            content=turn.content,
            tags=[f"from:{person}", f"org:{org}", f"chat:{chat}", f"for:{audience}"],
            source_items=[(chat, seq)],
            evidence=[ItemEvidence(chat, seq, audience, org)],
            updated_at=int(turn.at.timestamp() * 1000),
        )
        for seq, turn in enumerate(conversation.turns, start=1)
    ]
    entries_import(pool_id=bot.id, entries=entries)
    # What the worker does after an import [R6].
    vectors_fill(bot.id)
    return Built(bot, conversation, [entry.id for entry in entries])


@dataclass(frozen=True)
class Result:
    # ranker -> kind -> (R@1, R@5, R@10); kind "overall" over every question.
    recall: dict[str, dict[str, tuple[float, float, float]]]
    questions: dict[str, int]
    sees: int
    # The search route's ranker, fresh and analyzed, each next to its floor.
    timings: dict[str, tuple[Timing, Timing]]

    @property
    def met(self) -> bool:
        """[R5-R7] targets: the search route's ranker finds R@5 ≥ 0.80 overall and ≥ 0.65 for
        multi-hop and paraphrase; p50 ≤ 25 ms, p95 ≤ 60 ms; fresh p50 within 2× analyzed."""
        _, at5, _ = zip(
            *(self.recall["hybrid"][kind] for kind in ("overall", "multi-hop", "paraphrase")),
            strict=True,
        )
        fresh, analyzed = self.timings["fresh"][0], self.timings["analyzed"][0]
        return (
            at5[0] >= 0.80
            and min(at5[1:]) >= 0.65
            and analyzed.p50_ms <= 25
            and analyzed.p95_ms <= 60
            and fresh.p50_ms <= 2 * analyzed.p50_ms
        )


def _found_share(order: list[str], evidence: list[str], k: int) -> float:
    return sum(1 for entry_id in evidence if entry_id in order[:k]) / len(evidence)


def _recall(built: list[Built], reader_of: Callable[[Bot], Reader]) -> Result:
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0] * 3))
    counts: dict[str, int] = defaultdict(int)
    for pool in built:
        reader = reader_of(pool.bot)
        for question in pool.conversation.questions:
            counts[question.kind] += 1
            counts["overall"] += 1
            evidence = [pool.entry_ids[turn] for turn in question.evidence]
            for name, ranker in RANKERS.items():
                order = ranker(pool.bot, reader, question.text)
                for kind in (question.kind, "overall"):
                    for at, k in enumerate((1, 5, 10)):
                        sums[name][kind][at] += _found_share(order, evidence, k)
    recall = {
        name: {
            kind: (
                kinds[kind][0] / counts[kind],
                kinds[kind][1] / counts[kind],
                kinds[kind][2] / counts[kind],
            )
            for kind in (*KINDS, "overall")
        }
        for name, kinds in sums.items()
    }
    sees = len(
        list(
            visible_in_order(
                pool_id=built[0].bot.id, reader=reader_of(built[0].bot), active_only=True
            )
        )
    )
    return Result(recall=recall, questions=dict(counts), sees=sees, timings={})


def search_timed(
    groups: list[list[tuple[Bot, Reader, str]]], runs: int, *, route: bool
) -> list[tuple[Timing, Timing]]:
    """Search (limit 10) p50/p95 over each group of calls (bot, reader, question), each in a
    fixed shuffled order, and its floor: reading and decrypting exactly the entries it
    returned, by id. The groups' searches and floors take turns (`timed_in_turn`), so that a
    step from one group (a pool size) to another is not the machine's drift between them.
    With `route`, through the route (`GET …/memory/search`, DRF's test client, a real token),
    else through the Python API."""
    clients: dict[tuple[str | None, str], APIClient] = {}

    def searched(bot: Bot, reader: Reader, text: str) -> list[str]:
        if not route:
            return [entry["id"] for entry in search(bot, reader, text, TOP)[0]]
        key = (reader.person_id, reader.organization_id)
        if key not in clients:
            token = services.token_create(
                person=Person.objects.get(id=reader.person_id),
                organization=Organization.objects.get(id=reader.organization_id),
            )
            clients[key] = APIClient()
            clients[key].credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        url = f"/v1/bots/{bot.id}/memory/search"
        response = clients[key].get(url, {"q": text, "limit": str(TOP)})
        assert response.status_code == 200, response.content
        return [entry["id"] for entry in response.json()["entries"]]

    def in_turn(
        calls: list[tuple[Bot, Reader, str]],
    ) -> tuple[Callable[[], None], Callable[[], None]]:
        """The next search of `calls` and the next floor, each cycling through them in one
        fixed shuffled order."""
        calls = list(calls)
        random.Random(7).shuffle(calls)
        returned = {text: searched(bot, reader, text) for bot, reader, text in calls}
        searches = iter(range(10**9))
        floors = iter(range(10**9))

        def one_search() -> None:
            searched(*calls[next(searches) % len(calls)])

        def one_floor() -> None:
            _, _, text = calls[next(floors) % len(calls)]
            readable_values(Entry.objects.filter(id__in=returned[text]), *ENTRY_FIELDS)

        return one_search, one_floor

    timings = timed_in_turn([call for calls in groups for call in in_turn(calls)], runs=runs)
    return list(zip(timings[::2], timings[1::2], strict=True))


def run(world: bench_pool.World, *, runs: int, reuse: bool) -> Result:
    """`reuse`: the pools of an earlier run, where they hold the same conversations."""
    started = time.perf_counter()
    built = [
        (reuse and pool_reused(world, index, conversation))
        or pool_build(world, index, conversation)
        for index, conversation in enumerate(conversations())
    ]
    print(
        f"built or reused {len(built)} conversation pools, {sum(len(b.entry_ids) for b in built):,}"
        f" turns, in {time.perf_counter() - started:.1f} s (with their vectors)"
    )

    def reader_of(bot: Bot) -> Reader:
        return Reader.person(
            bot=bot, person_id=world.chosen.id, organization_id=world.organization.id
        )

    bench_pool.statistics_forget()
    calls = [
        (pool.bot, reader_of(pool.bot), question.text)
        for pool in built
        for question in pool.conversation.questions
    ]
    [fresh] = search_timed([calls], runs, route=True)
    bench_pool.settle()
    [analyzed] = search_timed([calls], runs, route=True)
    result = _recall(built, reader_of)
    return Result(
        recall=result.recall,
        questions=result.questions,
        sees=result.sees,
        timings={"fresh": fresh, "analyzed": analyzed},
    )


def table(result: Result) -> str:
    header = f"{'ranker':<8} {'kind':<11} {'questions':>9} {'R@1':>5} {'R@5':>5} {'R@10':>5}"
    lines = [header, "-" * len(header)]
    for name, kinds in result.recall.items():
        for kind in (*KINDS, "overall"):
            at1, at5, at10 = kinds[kind]
            count = result.questions[kind]
            lines.append(f"{name:<8} {kind:<11} {count:>9} {at1:>5.2f} {at5:>5.2f} {at10:>5.2f}")
    lines.append("")
    lines.append(f"search route (limit {TOP}, test client), reader sees {result.sees}: ms")
    for when, (timing, floor) in result.timings.items():
        lines.append(
            f"  {when:<9} p50 {timing.p50_ms:6.2f}  p95 {timing.p95_ms:6.2f}"
            f"   floor p50 {floor.p50_ms:5.2f}  p95 {floor.p95_ms:5.2f}  ({timing.runs} runs)"
        )
    return "\n".join(lines)
