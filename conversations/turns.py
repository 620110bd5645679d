"""The turn runner: one turn of a chat, end to end.

Stores the person's item and the turn with its person; lets the memory bot enrich the input;
the bot's model sees the history in the persons' own words and the (enriched) new input, with
`confide` offered except in test chats; stores the bot's reply; ends the turn and records
"turn ended" for the learning runs the turn's confessions stored.
The bot is never told that anything came from memory.

[C6] A turn always ends. Once the person's item is stored, whatever fails — a memory-bot step,
the bot's model, a stored text no key opens, a bug, the database — the turn still gets
the bot's item (the no-answer text when there is no answer), its end and its event, and the
turn records what went wrong as a code. A failed memory-bot step is the calm path: the input
unchanged, the calm reply. Everything shares the turn's deadline
(`OPENBOT_TURN_DEADLINE_SECONDS`); each wait also keeps its own.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast

from chats.models import Chat, Item, Turn
from chats.services import chat_history_delete, item_append, turn_end, turn_start
from memorybot.confide import CALM_REPLY, CONFIDE_TOOL, confide_hear
from memorybot.enrichment import enrich_input, enrichment_entry_ids
from memorybot.gateway import model_call, reply_deadline_s
from memorybot.models import ModelCall
from memorybot.providers import Message, ModelRequest
from memorybot.selectors import learning_runs_waiting
from memorybot.services import chat_records_forget
from memorybot.tasks import learning_enqueue
from openbot.fields import EncryptionKeyError, decrypt, readable
from openbot.idempotency import UNCLAIMED, AnswerGone, Claim
from openbot.models import Person

logger = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 4
BOT_PROMPT = "You are a helpful assistant. Answer the person briefly and clearly."
NO_ANSWER = "I am sorry, I cannot answer right now. Please try again in a moment."


@dataclass(frozen=True)
class TurnOutcome:
    turn: Turn
    items: list[Item]


@dataclass
class _Run:
    """A turn in progress: its deadline and the first thing that went wrong in it."""

    chat: Chat
    turn: Turn
    deadline_at: float  # a time.monotonic() value
    error: str = ""

    def wait_s(self, own_s: float) -> float:
        """A wait with a deadline of its own, never past the turn's."""
        return min(own_s, self.deadline_at - time.monotonic())

    def note(self, code: str) -> None:
        if not self.error:
            self.error = code

    def failed(self, step: str, exc: BaseException) -> None:
        unreadable = isinstance(exc, EncryptionKeyError)
        # The exception's type only: its message may quote content.
        logger.error(
            "turn %s of %s: %s failed (%s)", self.turn.pk, self.chat.pk, step, type(exc).__name__
        )
        self.note(Turn.Error.UNREADABLE if unreadable else Turn.Error.INTERNAL)


def _history(run: _Run) -> list[Message]:
    """Earlier items as the bot's model sees them: persons' own words, never enrichments.

    An item no key opens is left out (logged by table, row and column, never its
    ciphertext); the text is opened row by row so one damaged row does not hide the rest."""
    rows = (
        Item.objects.filter(chat=run.chat, seq__lt=run.turn.input_seq)
        .order_by("seq")
        .values_list("pk", "kind", "tool", Cast("text", TextField()))
    )
    messages: list[Message] = []
    for pk, kind, tool, sealed in rows:
        try:
            text = decrypt(sealed) if sealed else ""
        except EncryptionKeyError:
            logger.warning(
                "turn %s: %s row %s column text: no key opens it; left out of the history",
                run.turn.pk,
                Item._meta.db_table,
                pk,
            )
            run.note(Turn.Error.UNREADABLE)
            continue
        if kind == Item.Kind.PERSON:
            messages.append(Message.user(text))
        elif kind == Item.Kind.BOT:
            messages.append(Message.assistant(text))
        elif kind == Item.Kind.NOTICE:
            messages.append(Message.user(f"[OpenBot notice] {text}"))
        elif kind == Item.Kind.TOOL_RESULT:
            messages.append(Message.user(f"[result of {tool or 'a tool'}] {text}"))
    return messages


def _memory_bot_step(run: _Run, step: str, work: Callable[[], str], fallback: str) -> str:
    """A memory-bot step that fails in any way is a step that failed: the caller
    goes on with `fallback` (the unchanged input, the calm reply)."""
    try:
        return work()
    except Exception as exc:
        run.failed(step, exc)
        return fallback


def _answer(run: _Run, person_item: Item) -> str:
    """The bot's reply to the turn's input, confiding along the way; NO_ANSWER (with the
    reason noted on the run) when its model gives none."""
    chat, turn = run.chat, run.turn
    new_input = _memory_bot_step(
        run,
        "enrichment",
        partial(
            enrich_input,
            turn=turn,
            item=person_item,
            deadline_s=run.wait_s(reply_deadline_s()),
        ),
        fallback=person_item.text,
    )
    carried = enrichment_entry_ids(turn=turn)  # the answer's input carries them
    messages = [Message.system(BOT_PROMPT), *_history(run), Message.user(new_input)]
    tools = () if chat.test else (CONFIDE_TOOL,)
    for _ in range(MAX_TOOL_ROUNDS):
        outcome = model_call(
            organization=chat.organization,
            bot=chat.bot,
            purpose="answer",
            model=chat.bot.model,
            request=ModelRequest(messages=tuple(messages), tools=tools),
            deadline_s=run.wait_s(settings.OPENBOT_ANSWER_DEADLINE_SECONDS),
            chat_id=chat.id,
            entry_ids=carried,
        )
        if not outcome.ok or outcome.result is None:
            timed_out = outcome.status == ModelCall.Status.TIMEOUT
            run.note(Turn.Error.TIMEOUT if timed_out else Turn.Error.MODEL_ERROR)
            return NO_ANSWER
        result = outcome.result
        if not result.tool_calls:
            reply = (result.content or "").strip()
            if not reply:
                run.note(Turn.Error.MODEL_ERROR)
            return reply or NO_ANSWER
        messages.append(Message.assistant(result.content, result.tool_calls))
        for call in result.tool_calls:
            if call.name == CONFIDE_TOOL.name and tools:
                said = call.arguments.get("text")
                answer = _memory_bot_step(
                    run,
                    "confide",
                    partial(
                        confide_hear,
                        turn=turn,
                        text=said if isinstance(said, str) else "",
                        deadline_s=run.wait_s(reply_deadline_s()),
                    ),
                    fallback=CALM_REPLY,
                )
            else:
                answer = f"There is no tool named {call.name[:60]!r}."
            messages.append(Message.tool(call.id, answer))
    run.note(Turn.Error.MODEL_ERROR)  # it kept calling tools and never answered
    return NO_ANSWER


def _end(run: _Run, reply: str) -> Item:
    with transaction.atomic():
        bot_item = item_append(chat=run.chat, kind=Item.Kind.BOT, text=reply, turn=run.turn)
        turn_end(turn=run.turn, error=run.error)
        learning_enqueue(learning_runs_waiting(turn_id=run.turn.pk))
    return bot_item


def turn_run(*, chat: Chat, person: Person, text: str, claim: Claim = UNCLAIMED) -> TurnOutcome:
    """Run one turn started by `person` (the authenticated caller); it always ends.
    `claim` records the turn for the request's `Idempotency-Key` when it starts."""
    deadline_at = time.monotonic() + settings.OPENBOT_TURN_DEADLINE_SECONDS
    turn = turn_start(chat=chat, person=person, text=text, claim=claim)
    # The words are in hand: the stored copy is not read back (nor decrypted).
    person_item = Item.objects.defer("text").get(chat=chat, seq=turn.input_seq)
    person_item.text = text
    run = _Run(chat=chat, turn=turn, deadline_at=deadline_at)
    reply = NO_ANSWER
    try:
        reply = _answer(run, person_item)
    except BaseException as exc:
        run.failed("the answer", exc)
        if not isinstance(exc, Exception):
            raise  # the process is stopping: the turn still ends (below), then it stops
    finally:
        bot_item = _end(run, reply)
    return TurnOutcome(turn=turn, items=[person_item, bot_item])


def turn_again(*, chat: Chat, turn_id: str) -> TurnOutcome | None:
    """A turn of `chat` and its items as `turn_run` answered them, read again from the
    rows for a replay; None while the turn runs. Once its input item is gone (the history
    deleted), so is the answer: `AnswerGone`."""
    turn = Turn.objects.filter(chat=chat, pk=turn_id).first()
    if turn is not None and turn.ended_at is None:
        return None
    items = [] if turn is None else readable(Item.objects.filter(turn=turn).order_by("seq"))
    if turn is None or not items or items[0].seq != turn.input_seq:
        raise AnswerGone()
    return TurnOutcome(turn=turn, items=items)


@transaction.atomic
def chat_history_forget(*, chat: Chat) -> None:
    """Delete the chat's history: its items, the confessions and enrichments that
    repeat its words (an enrichment keeps the person's original), and the requests and
    results of its model calls. Memory learned from the chat stays; purging `chat:<id>`
    removes that too."""
    chat_history_delete(chat=chat)
    chat_records_forget(chat_id=chat.id)
