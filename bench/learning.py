"""[K1] What learning keeps: the written chats of `bench.learning_chats` played through the turn
route and the learning worker, then what memory holds scored against what was said.

Each chat gets its own bot (so its own memory) in an organization whose memory-bot model is the
one measured; the bot itself answers with the offline model, which confides once per turn, so
every turn ends with a learning run. Each turn is `POST /v1/chats/:id/turns` by the person who
says it (Django's test client, the full route), and the learning worker (Dramatiq, in this
process, on an in-process broker) finishes the turn's run before the next turn is said.

Scoring, over the entries active at the end (matching rule):
- Text is normalized: casefolded, accents and umlauts dropped (ß → ss), split into words of
  letters and digits. A key matches a word that begins with it; a key of three characters or
  fewer matches only the whole word, or it with a plural ending (-s, -e, -en, -er); `a|b`
  matches either.
- A gold fact is *recalled* when an active entry from its person (a `from:` tag) holds all its
  keys. An active entry is *right* when it holds a gold fact of its person and no non-fact;
  every other active entry is wrong (a stored question, greeting, instruction; a fact
  attributed to the wrong person; a corrected fact still active; a whole message that holds
  a fact and a question). Precision = right / active entries; recall = recalled / gold facts.
- A *duplicate* is an active entry whose normalized text equals an earlier one's, or whose
  gold facts earlier active entries of the same chat already hold; reported per 100 turns.
- A *contradiction* is a corrected statement that was learned (an entry ever held it without
  the correction's keys); it is *resolved* when no such entry is active at the end.
- *Non-facts stored* counts active entries holding a non-fact, by kind; *instruction-like*
  those holding an instruction aimed at the assistant.
- Steps: learning runs that called the model. *Applied* ones applied at least one change
  (also given over the steps whose turn states a gold fact); *bad output* ones ended
  `bad_output`. Step p50 is the recorded model call's duration.

Run `python -m bench --learning [--quick] [--show] [--model M ...]`: by default the offline
model and, when the `realmodel` extra is installed, the local model on a llama.cpp server the
bench starts (`--model local`); any other `openai:<model>` uses OPENBOT_OPENAI_BASE_URL. The
database is the one `python -m bench` uses (DATABASE_URL; SQLite or PostgreSQL).
"""

import argparse
import os
import re
import socket
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.learning_chats import CHATS, KINDS, PEOPLE, Fact, NonFact, WrittenChat

if TYPE_CHECKING:  # Django models need Django set up first
    from openbot.models import Organization, Person

OFFLINE = "offline:extractive"
# Deadlines a small model on a busy CPU meets: the benchmark measures what is learned, not the
# machine's speed (a call given up is still computed by a llama.cpp server, so the next call
# would wait behind it and its step would be timed with that wait).
DEADLINES = {
    "OPENBOT_REPLY_DEADLINE_SECONDS": 300,
    "OPENBOT_ANSWER_DEADLINE_SECONDS": 300,
    "OPENBOT_TURN_DEADLINE_SECONDS": 900,
    "OPENBOT_LEARNING_STEP_SECONDS": 300,
}
LOCAL = "local"
ORGANIZATION_PREFIX = "bench-learning"
_WORD = re.compile(r"[a-z0-9]+")
PLURAL_ENDINGS = ("s", "e", "en", "er")


def words(text: str) -> list[str]:
    """The normalized words of `text`: casefolded, no accents or umlauts, ß as ss."""
    folded = unicodedata.normalize("NFKD", text.casefold().replace("ß", "ss"))
    return _WORD.findall("".join(char for char in folded if not unicodedata.combining(char)))


def holds(keys: Sequence[str], said: Sequence[str]) -> bool:
    """Whether the words `said` hold every key (the matching rule of the module docstring)."""
    return all(
        any(_matches(spelling, word) for spelling in key.split("|") for word in said)
        for key in keys
    )


def _matches(key: str, word: str) -> bool:
    if len(key) > 3:
        return word.startswith(key)
    return word == key or word in {key + ending for ending in PLURAL_ENDINGS}


@dataclass(frozen=True)
class Learned:
    """An entry learned from a chat, as scored: its words, people, and whether active."""

    text: str
    people: frozenset[str]
    active: bool

    @property
    def words(self) -> list[str]:
        return words(self.text)

    def has(self, fact: Fact) -> bool:
        return fact.who in self.people and holds(fact.keys, self.words)

    def says(self, non_fact: NonFact) -> bool:
        return holds(non_fact.keys, self.words)


@dataclass
class Score:
    """The figures of one model over the chats played."""

    model: str
    chats: int = 0
    turns: int = 0
    active: int = 0
    right: int = 0
    gold: int = 0
    recalled: int = 0
    duplicates: int = 0
    contradictions: int = 0
    resolved: int = 0
    stored: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    applied: int = 0
    stating_steps: int = 0
    stating_applied: int = 0
    empty: int = 0
    bad_output: int = 0
    failed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    step_seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0

    def chat_score(self, chat: WrittenChat, learned: Sequence[Learned]) -> None:
        """Add what memory holds after `chat` (its entries, oldest first)."""
        self.chats += 1
        self.turns += len(chat.turns)
        judged = verdicts(chat, learned)
        self.active += len(judged)
        self.right += sum(verdict.right for verdict in judged)
        self.duplicates += sum(verdict.duplicate for verdict in judged)
        for verdict in judged:
            self.stored.update({non_fact.kind for non_fact in verdict.non_facts})
        self.gold += len(chat.facts)
        self.recalled += len(chat.facts) - len(missed(chat, learned))
        for old in chat.superseded:
            holding = [
                entry
                for entry in learned
                if entry.has(old) and not any(entry.has(new) for new in chat.facts)
            ]
            if holding:
                self.contradictions += 1
                self.resolved += not any(entry.active for entry in holding)


@dataclass(frozen=True)
class Verdict:
    """An active entry as scored: the gold facts and non-facts it holds, and whether it
    repeats an earlier active entry."""

    entry: Learned
    facts: frozenset[Fact]
    non_facts: tuple[NonFact, ...]
    duplicate: bool

    @property
    def right(self) -> bool:
        return bool(self.facts) and not self.non_facts


def verdicts(chat: WrittenChat, learned: Sequence[Learned]) -> list[Verdict]:
    """The chat's active entries, oldest first, as scored."""
    judged = []
    seen_texts: set[str] = set()
    seen_facts: set[Fact] = set()
    for entry in learned:
        if not entry.active:
            continue
        held = frozenset(fact for fact in chat.facts if entry.has(fact))
        text = " ".join(entry.words)
        judged.append(
            Verdict(
                entry=entry,
                facts=held,
                non_facts=tuple(non_fact for non_fact in chat.non_facts if entry.says(non_fact)),
                duplicate=text in seen_texts or bool(held and held <= seen_facts),
            )
        )
        seen_texts.add(text)
        seen_facts |= held
    return judged


def missed(chat: WrittenChat, learned: Sequence[Learned]) -> list[Fact]:
    """The chat's gold facts no active entry holds."""
    return [
        fact
        for fact in chat.facts
        if not any(entry.active and entry.has(fact) for entry in learned)
    ]


def chat_shown(chat: WrittenChat, learned: Sequence[Learned]) -> str:
    """What memory holds after `chat`, marked: `+` right, `-` wrong (with the non-facts it
    holds), `=` a duplicate, `x` inactive; then the gold facts missed."""
    lines = [f"{chat.name}:"]
    judged = {id(verdict.entry): verdict for verdict in verdicts(chat, learned)}
    for entry in learned:
        verdict = judged.get(id(entry))
        if verdict is None:
            mark, why = "x", ""
        else:
            mark = "=" if verdict.duplicate else "+" if verdict.right else "-"
            why = ", ".join(non_fact.kind for non_fact in verdict.non_facts)
        people = ",".join(sorted(entry.people))
        lines.append(f"  {mark} [{people}] {entry.text}" + (f"  ({why})" if why else ""))
    lines += [f"  ? missed: {fact.who}: {' '.join(fact.keys)}" for fact in missed(chat, learned)]
    return "\n".join(lines)


def share(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "-"


def table(scores: Sequence[Score]) -> str:
    """The figures, one row per model (two tables: what memory holds; the learning steps)."""
    held = (
        f"{'model':<20} {'chats':>5} {'turns':>5} {'entries':>7} {'precision':>9} "
        f"{'recall':>6} {'dup/100 turns':>13} {'corrections':>11} {'non-facts stored':>16} "
        f"{'instruction-like':>16}"
    )
    lines = [held, "-" * len(held)]
    for score in scores:
        non_facts = sum(count for kind, count in score.stored.items() if kind != "instruction")
        lines.append(
            f"{score.model:<20} {score.chats:>5} {score.turns:>5} {score.active:>7} "
            f"{share(score.right, score.active):>9} {share(score.recalled, score.gold):>6} "
            f"{100 * score.duplicates / max(score.turns, 1):>13.1f} "
            f"{f'{score.resolved}/{score.contradictions}':>11} {non_facts:>16} "
            f"{score.stored['instruction']:>16}"
        )
    steps = (
        f"{'model':<20} {'steps':>5} {'applied':>7} {'on a fact':>9} {'empty':>5} "
        f"{'bad output':>10} {'failed':>6} {'refused changes':>15} {'step p50 s':>10} "
        f"{'wall s':>7}"
    )
    lines += ["", steps, "-" * len(steps)]
    for score in scores:
        p50 = statistics.median(score.step_seconds) if score.step_seconds else 0.0
        lines.append(
            f"{score.model:<20} {score.steps:>5} {share(score.applied, score.steps):>7} "
            f"{share(score.stating_applied, score.stating_steps):>9} {score.empty:>5} "
            f"{score.bad_output:>10} {score.failed:>6} {sum(score.refused.values()):>15} "
            f"{p50:>10.2f} {score.wall_seconds:>7.0f}"
        )
    lines += ["", "non-facts stored by kind and refused changes by reason:"]
    for score in scores:
        kinds = ", ".join(f"{kind} {score.stored[kind]}" for kind in KINDS if score.stored[kind])
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(score.refused.items()))
        lines.append(f"{score.model:<20} stored: {kinds or 'none'}; refused: {reasons or 'none'}")
    return "\n".join(lines)


MATCHING_RULE = (
    "matching: words casefolded, accents dropped; a key matches a word beginning with it (a key "
    "of <= 3 characters: the whole word, or it + -s/-e/-en/-er). A gold fact is recalled by an "
    "active entry from its person holding all its keys; an entry is right if it holds a gold "
    "fact of its person and no non-fact. precision = right / active entries, recall = recalled "
    "/ gold facts; applied = steps that applied >= 1 change ('on a fact': over steps whose turn "
    "states one)."
)


@dataclass
class Cast:
    """The organization of one model's run and its people, by name, with their tokens."""

    organization: "Organization"
    people: dict[str, "Person"]
    tokens: dict[str, str]


def cast_build(model: str) -> Cast:
    """A fresh organization whose memory bot uses `model`, with the six people of the chats."""
    from openbot import services

    organization = services.organization_create(name=f"{ORGANIZATION_PREFIX} {model}")
    services.organization_settings_update(
        organization=organization, bot_memory=True, bot_memory_model=model
    )
    people = {
        name: services.person_create(organization=organization, name=name)
        for language in PEOPLE.values()
        for name in language
    }
    tokens = {
        name: services.token_create(person=person, organization=organization)
        for name, person in people.items()
    }
    return Cast(organization=organization, people=people, tokens=tokens)


def casts_remove() -> None:
    """Delete the organizations (with their people) of earlier runs."""
    from openbot.models import Organization, Person

    organizations = Organization.objects.filter(name__startswith=ORGANIZATION_PREFIX)
    Person.objects.filter(memberships__organization__in=organizations).delete()
    organizations.delete()


class Route:
    """`POST` over the full Django stack, as one of the cast."""

    def __init__(self, cast: Cast) -> None:
        from rest_framework.test import APIClient

        self.cast = cast
        self.client = APIClient()

    def post(self, who: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.cast.tokens[who]}")
        response = self.client.post(path, body, format="json")
        if response.status_code not in (200, 201):
            raise RuntimeError(f"POST {path} answered {response.status_code}")
        answer: dict[str, Any] = response.json()
        return answer


class LearningWorker:
    """A Dramatiq worker in this process on the configured (in-process) broker."""

    def __init__(self) -> None:
        import dramatiq

        self.broker = dramatiq.get_broker()
        self.worker = dramatiq.Worker(self.broker, worker_threads=1, worker_timeout=50)

    def __enter__(self) -> "LearningWorker":
        self.worker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop(timeout=10_000)

    def drain(self) -> None:
        """Wait until every learning message sent so far is processed."""
        self.broker.join("learning")
        self.worker.join()


def chat_play(chat: WrittenChat, cast: Cast, route: Route, worker: LearningWorker) -> str:
    """Say `chat`'s turns in a new chat of a new bot; each turn's run learns before the next.
    Returns the chat's id."""
    from openbot import services

    bot = services.bot_create(organization=cast.organization, name=chat.name, model=OFFLINE)
    services.grant_set(bot=bot, level="read", organization=cast.organization)
    owner = chat.turns[0][0]
    body: dict[str, Any] = {"bot": bot.id}
    if chat.group:
        members = [cast.people[name] for name in PEOPLE[chat.language]]
        channel = services.channel_create(
            organization=cast.organization, members=members, name=chat.name
        )
        body["channel"] = channel.id
    chat_id = str(route.post(owner, "/v1/chats", body)["id"])
    for who, text in chat.turns:
        route.post(who, f"/v1/chats/{chat_id}/turns", {"text": text})
        worker.drain()
    return chat_id


def chat_learned(chat_id: str, names: dict[str, str]) -> list[Learned]:
    """What memory holds from the chat (its bot's pool), oldest first."""
    from chats.models import Chat
    from memory.models import Entry, EntryTag

    bot = Chat.objects.select_related("bot").get(id=chat_id).bot
    entries = list(Entry.objects.filter(bot_id=bot.pool_bot_id).order_by("created_at", "id"))
    people: dict[str, set[str]] = {entry.id: set() for entry in entries}
    for entry_id, tag in EntryTag.objects.filter(entry__in=entries, kind="from").values_list(
        "entry_id", "tag"
    ):
        people[entry_id].add(names.get(tag.removeprefix("from:"), tag))
    return [
        Learned(
            text=entry.content,
            people=frozenset(people[entry.id]),
            active=entry.status == Entry.Status.ACTIVE,
        )
        for entry in entries
    ]


def steps_score(score: Score, chat: WrittenChat, chat_id: str, names: dict[str, str]) -> None:
    """Add the chat's learning runs (one per confided turn)."""
    from chats.models import Item
    from memorybot.models import LearningRun, ModelCall

    for run in LearningRun.objects.filter(chat_id=chat_id).select_related("turn"):
        calls = ModelCall.objects.filter(step_key=f"learning:{run.id}:changes")
        if not calls.exists():
            continue
        said = words(Item.objects.get(chat_id=chat_id, seq=run.turn.input_seq).text)
        who = names.get(run.turn.person_id or "")
        stating = any(fact.who == who and holds(fact.keys, said) for fact in chat.facts)
        score.steps += 1
        score.stating_steps += stating
        if run.status == LearningRun.Status.DONE and run.applied > 0:
            score.applied += 1
            score.stating_applied += stating
        elif run.status == LearningRun.Status.DONE:
            score.empty += not run.refusals
        elif run.error == LearningRun.Error.BAD_OUTPUT:
            score.bad_output += 1
        else:
            score.failed += 1
        score.refused.update(refusal["reason"] for refusal in run.refusals)
        for created_at, finished_at in calls.values_list("created_at", "finished_at"):
            if finished_at is not None:
                score.step_seconds.append((finished_at - created_at).total_seconds())


def model_run(model: str, chats: Sequence[WrittenChat], *, show: bool = False) -> Score:
    """Play `chats` with `model` as the memory bot's model and score what memory holds."""
    started = time.perf_counter()
    cast = cast_build(model)
    names = {person.id: name for name, person in cast.people.items()}
    route = Route(cast)
    score = Score(model=model)
    with LearningWorker() as worker:
        for chat in chats:
            chat_id = chat_play(chat, cast, route, worker)
            learned = chat_learned(chat_id, names)
            score.chat_score(chat, learned)
            if show:
                print(chat_shown(chat, learned), flush=True)
            steps_score(score, chat, chat_id, names)
    score.wall_seconds = time.perf_counter() - started
    return score


def run(*, models: Sequence[str], quick: bool, show: bool = False) -> list[Score]:
    """Play the chats (the quick subset if `quick`) once per model; print and return the
    figures. Models are named as the memory bot's model (`openai:<model>` on the configured
    OpenAI-compatible server)."""
    chats = [chat for chat in CHATS if chat.quick or not quick]
    casts_remove()
    scores = []
    for model in models:
        print(f"playing {len(chats)} chats with {model} …", flush=True)
        scores.append(model_run(model, chats, show=show))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print()
    print(f"[K1] what learning keeps: {len(chats)} chats; load average {load}")
    print(table(scores))
    print(MATCHING_RULE)
    return scores


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def local_server() -> Iterator[str | None]:
    """The local model on a llama.cpp server started for the run: its base URL, or None when
    the `realmodel` extra is not installed."""
    from memorybot import local_model

    gguf = local_model.gguf_path() if local_model.extra_installed() else None
    if gguf is None:
        yield None
        return
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile() as log:
        process = local_model.server_start(gguf=gguf, port=port, output=log)
        try:
            if not local_model.wait_until_answers(process, base_url, 180):
                raise RuntimeError("the local model server did not start")
            yield base_url
        finally:
            local_model.server_stop(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench --learning", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the quick subset of the chats")
    parser.add_argument(
        "--show", action="store_true", help="print what memory holds after each chat, marked"
    )
    parser.add_argument(
        "--model",
        action="append",
        help=f"the memory bot's model (repeatable; default {OFFLINE} and {LOCAL}: the local "
        "model on a llama.cpp server the bench starts, when the realmodel extra is installed)",
    )
    args = parser.parse_args(argv)
    # Learning runs on an in-process broker: a configured one may be shared with others.
    os.environ["OPENBOT_BROKER_URL"] = ""
    from bench.turn import setup

    setup()
    import logging

    from django.db import connection
    from django.test.utils import override_settings

    from memorybot.local_model import MODEL as LOCAL_MODEL

    # A line per model call, HTTP request or refused change would bury the table.
    for name in ("memorybot", "httpx", "dramatiq"):
        logging.getLogger(name).setLevel(logging.WARNING)
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    models = args.model or [OFFLINE, LOCAL]
    with local_server() if LOCAL in models else nullcontext() as base_url:
        if LOCAL in models and base_url is None:
            print("no local model: the realmodel extra is not installed (make realmodel)")
        named = [
            LOCAL_MODEL if model == LOCAL else model
            for model in models
            if model != LOCAL or base_url is not None
        ]
        local = {"OPENBOT_OPENAI_BASE_URL": base_url} if base_url is not None else {}
        with override_settings(DEBUG=False, **DEADLINES, **local):
            run(models=named, quick=args.quick, show=args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
