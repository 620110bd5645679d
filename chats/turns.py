"""[C4, §11] The turn runner: one turn of a chat, end to end.

Stores the person's item and the turn with its person; lets the memory bot enrich the input
[N1]; the bot's model sees the history in the persons' own words and the (enriched) new input
[N3], with `confide` offered except in test chats [F1]; stores the bot's reply; ends the turn
and records "turn ended" for the learning runs the turn's confessions stored [W1, W2].
The bot is never told that anything came from memory.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from chats.models import Chat, Item, Turn
from chats.services import chat_history_delete, item_append, turn_end, turn_start
from memorybot.calls import model_call
from memorybot.confide import CONFIDE_TOOL, confide_hear
from memorybot.enrichment import enrich_input, enrichment_entry_ids
from memorybot.models import Confession, Enrichment, LearningRun
from memorybot.providers import Message, ModelRequest
from memorybot.purge import chat_model_calls_blank
from memorybot.tasks import learning_enqueue
from openbot.models import Person

MAX_TOOL_ROUNDS = 4
BOT_PROMPT = "You are a helpful assistant. Answer the person briefly and clearly."
NO_ANSWER = "I am sorry, I cannot answer right now. Please try again in a moment."


@dataclass(frozen=True)
class TurnOutcome:
    turn: Turn
    items: list[Item]


def _history(chat: Chat, before_seq: int) -> list[Message]:
    """Earlier items as the bot's model sees them: persons' own words, never enrichments."""
    messages: list[Message] = []
    for item in Item.objects.filter(chat=chat, seq__lt=before_seq).order_by("seq"):
        if item.kind == Item.Kind.PERSON:
            messages.append(Message.user(item.text))
        elif item.kind == Item.Kind.BOT:
            messages.append(Message.assistant(item.text))
        elif item.kind == Item.Kind.NOTICE:
            messages.append(Message.user(f"[OpenBot notice] {item.text}"))
        elif item.kind == Item.Kind.TOOL_RESULT:
            messages.append(Message.user(f"[result of {item.tool or 'a tool'}] {item.text}"))
    return messages


def turn_run(*, chat: Chat, person: Person, text: str) -> TurnOutcome:
    """Run one turn started by `person` (the authenticated caller) [C3]."""
    turn = turn_start(chat=chat, person=person, text=text)
    person_item = Item.objects.get(chat=chat, seq=turn.input_seq)
    new_input = enrich_input(turn=turn, item=person_item)
    carried = enrichment_entry_ids(turn=turn)  # [P4] the answer's input carries them
    messages = [
        Message.system(BOT_PROMPT),
        *_history(chat, turn.input_seq),
        Message.user(new_input),
    ]
    tools = () if chat.test else (CONFIDE_TOOL,)
    reply = NO_ANSWER
    for _ in range(MAX_TOOL_ROUNDS):
        outcome = model_call(
            organization=chat.organization,
            bot=chat.bot,
            purpose="answer",
            model=chat.bot.model,
            request=ModelRequest(messages=tuple(messages), tools=tools),
            deadline_s=settings.OPENBOT_ANSWER_DEADLINE_SECONDS,
            chat_id=chat.id,
            entry_ids=carried,
        )
        if not outcome.ok or outcome.result is None:
            break
        result = outcome.result
        if not result.tool_calls:
            reply = (result.content or "").strip() or NO_ANSWER
            break
        messages.append(Message.assistant(result.content, result.tool_calls))
        for call in result.tool_calls:
            if call.name == CONFIDE_TOOL.name and tools:
                said = call.arguments.get("text")
                answer = confide_hear(turn=turn, text=said if isinstance(said, str) else "")
            else:
                answer = f"There is no tool named {call.name[:60]!r}."
            messages.append(Message.tool(call.id, answer))
    with transaction.atomic():
        bot_item = item_append(chat=chat, kind=Item.Kind.BOT, text=reply, turn=turn)
        turn_end(turn=turn)
        learning_enqueue(
            list(
                LearningRun.objects.filter(
                    turn=turn, status=LearningRun.Status.WAITING
                ).values_list("id", flat=True)
            )
        )
    return TurnOutcome(turn=turn, items=[person_item, bot_item])


@transaction.atomic
def chat_history_forget(*, chat: Chat) -> None:
    """[C4, P3] Delete the chat's history: its items, the confessions and enrichments that
    repeat its words (an enrichment keeps the person's original), and the requests and
    results of its model calls [P4]. Memory learned from the chat stays; purging `chat:<id>`
    removes that too."""
    chat_history_delete(chat=chat)
    Confession.objects.filter(chat=chat).delete()
    # Ids only: the delete collector would otherwise load (and decrypt) the rows.
    Enrichment.objects.filter(chat=chat).only("id").delete()
    chat_model_calls_blank(chat_id=chat.id)
