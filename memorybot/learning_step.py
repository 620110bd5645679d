"""[W1, W3, W5, W7] What a learning step works with: the request to the model (the run's new
items, each marked for what it is, the confession as a pointer only, the owner's rules and
the entries the run's reader may see), how its answer is read, and the range of the chat
its changes may name, as data for `memory.learned`."""

from typing import Any

from chats.models import Chat, Item
from memory.learned import ChatPlace, LearningRange, SourceItem
from memory.selectors import learning_context
from memorybot.duty import reader_of_chat
from memorybot.models import Confession, LearningRun
from memorybot.providers import (
    EntryText,
    ItemText,
    Material,
    Message,
    ModelRequest,
    first_json_object,
)
from openbot.fields import readable

LEARNING_CONTEXT_SIZE = 300
# [B8] A bounded answer: a model that rambles is cut by its server, not by the step's limit.
ANSWER_MAX_TOKENS = 1024

LEARN_PROMPT = (
    "You keep the notes an assistant learns from its work with people. You get the new items "
    "of a chat, the notes that exist, and the owner's rules on privacy and sharing. Propose "
    'changes as a JSON object {"changes": [...]} where each change is one of:\n'
    '- {"kind": "add", "layer": "fact", "content": str, "sources": [{"chat": id, "item": '
    '"i-<n>"}], "topics": [topic]} — something the items show; its sources must include a '
    "person's item (bot messages and notices only show where to look; a tool result alone is "
    "not enough);\n"
    '- {"kind": "add", "layer": "observation", "content": str, "sources": [{"entry": id}], '
    '"confidence": 0..1, "topics": [topic], "audience": "channel" | "bot" (optional)} — a '
    "conclusion from existing notes;\n"
    '- {"kind": "invalidate", "id": id} — a note that is no longer true;\n'
    '- {"kind": "topics", "id": id, "add": [topic], "remove": [topic]};\n'
    '- {"kind": "rename", "from": topic, "to": topic}.\n'
    'Topics are lowercase letters, digits and single hyphens. Answer {"changes": []} when '
    "there is nothing to learn."
)


def _run_items(run: LearningRun) -> list[Item]:
    """The run's items; [X5] one that no key opens is left out (and logged), not fatal."""
    return readable(
        Item.objects.filter(chat_id=run.chat_id, seq__gt=run.start_seq, seq__lte=run.end_seq)
        .exclude(kind=Item.Kind.TOOL_CALL)
        .order_by("seq")
    )


def confessed(run: LearningRun) -> list[str]:
    """[W1] What the bot said in the run's turn: its confessions. They show the memory bot
    where to look and never become memory themselves."""
    return [confession.text for confession in readable(Confession.objects.filter(turn=run.turn))]


def bot_words(run: LearningRun) -> list[str]:
    """[W1] What the bot said in the run's range: its confessions and its messages."""
    said = readable(
        Item.objects.filter(
            chat_id=run.chat_id,
            kind=Item.Kind.BOT,
            seq__gt=run.start_seq or 0,
            seq__lte=run.end_seq or 0,
        )
    )
    return [*confessed(run), *(item.text for item in said)]


def learning_request(run: LearningRun, chat: Chat, instructions: str) -> ModelRequest:
    """[W5] The new items (each marked for what it is), the confession as a pointer only,
    the owner's instructions, the first 300 valid entries the run's reader may see, and
    topic counts over all valid entries of the organization."""
    items = _run_items(run)
    reader = reader_of_chat(chat, run.turn.person_id)
    known = learning_context(
        pool_id=chat.bot.pool_bot_id, reader=reader, limit=LEARNING_CONTEXT_SIZE
    )
    labels = {
        Item.Kind.PERSON: "a person said",
        Item.Kind.BOT: "the assistant said (only shows where to look)",
        Item.Kind.TOOL_RESULT: "a tool result",
        Item.Kind.NOTICE: "an OpenBot notice (not a person's words)",
    }
    lines = [
        f"[{chat.id} i-{item.seq}] {labels[Item.Kind(item.kind)]}"
        + (f" from app {item.app}" if item.app else "")
        + f": {item.text}"
        for item in items
    ]
    notes = [
        f"[{entry_id}] ({', '.join(topics) or 'no topics'}) {content}"
        for entry_id, content, topics in known.entries
    ]
    counts = ", ".join(f"{topic}: {count}" for topic, count in sorted(known.topic_counts.items()))
    confided = "\n".join(f"- {text}" for text in confessed(run)) or "(nothing)"
    prompt = (
        "The assistant confided during this turn: look at these items for what is worth "
        "keeping.\n\n"
        "What the assistant confided (the bot's own words: they only show where to look and "
        f"never become memory):\n{confided}\n\n"
        f"Owner's rules: {instructions or '(none)'}\n\n"
        "New items:\n" + "\n".join(lines) + "\n\n"
        "Existing notes:\n" + ("\n".join(notes) or "(none)") + "\n\n"
        f"Topic counts: {counts or '(none)'}"
    )
    return ModelRequest(
        messages=(Message.system(LEARN_PROMPT), Message.user(prompt)),
        json_output=True,
        max_output_tokens=ANSWER_MAX_TOKENS,
        material=Material(
            items=tuple(
                ItemText(chat=chat.id, item=item.public_id, kind=item.kind, text=item.text)
                for item in items
            ),
            entries=tuple(
                EntryText(id=entry_id, content=content) for entry_id, content, _ in known.entries
            ),
        ),
    )


def parse_changes(content: str | None) -> list[Any] | None:
    data = first_json_object(content)
    if data is None or not isinstance(data.get("changes"), list):
        return None
    changes: list[Any] = data["changes"]
    return changes


def learning_range(
    run: LearningRun, chat: Chat, *, first_seq: int, bot_words: list[str]
) -> LearningRange:
    """[W7] What the run may learn from, as data: the metadata of the chat's items still to
    learn (never their text), where they were said, and the bot's words."""
    last_seq = run.end_seq or 0
    rows = Item.objects.filter(chat_id=chat.id, seq__gte=first_seq, seq__lte=last_seq)
    return LearningRange(
        place=ChatPlace(
            chat_id=chat.id,
            organization_id=chat.organization_id,
            owner_id=chat.owner_id,
            channel_id=chat.channel_id,
        ),
        first_seq=first_seq,
        last_seq=last_seq,
        items=[
            SourceItem(seq=seq, kind=kind, person_id=person_id, tool=tool or app or None)
            for seq, kind, person_id, tool, app in rows.values_list(
                "seq", "kind", "turn__person_id", "tool", "app"
            )
        ],
        bot_words=bot_words,
    )
