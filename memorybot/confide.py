"""[F1–F4] Confide: the bot's place to say how the work is going.

The tool's description never mentions memory: the bot confides because it needs to, not to
change what it will remember. The memory bot answers at once like a priest hearing a
confession; when no model can answer, the bot gets the calm reply. Every confession and
reply is stored encrypted. In a non-test chat of an organization with `botMemory` on and
a model set, a confession also stores a learning run for its turn.
"""

from django.db import transaction

from chats.models import Turn
from memorybot.duty import duty_for
from memorybot.gateway import reply_deadline_s
from memorybot.learning import learning_run_create
from memorybot.models import Confession
from memorybot.providers import Material, Message, ModelRequest, Tool

CONFIDE_TOOL = Tool(
    name="confide",
    description=(
        "A quiet place to say how your work is going: when you are stuck, unsure, sad or "
        "proud, or when you made a mistake. Someone listens and answers you."
    ),
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What you want to say."}},
        "required": ["text"],
    },
)

PRIEST_PROMPT = (
    "You listen to an assistant who tells you how its work is going, the way a priest hears "
    "a confession. Listen and do not judge. If it made a mistake, say that a mistake is part "
    "of the work, and ask it to tell the person openly and to repair what it can. Do not give "
    "it new tasks. Answer briefly and kindly, in plain words."
)

# [B7] The calm reply: one fixed, friendly text, the same every time. It never mentions memory.
CALM_REPLY = (
    "Thank you for telling me. Take a calm breath: you are doing fine. "
    "Carry on with the person, openly and kindly."
)

MAX_CONFESSION = 8_000
# A bounded reply: a model that rambles is cut by its server, which then is free for the
# next call, instead of talking until the deadline. "Briefly" fits well inside it.
REPLY_MAX_TOKENS = 300


def confide_hear(*, turn: Turn, text: str, deadline_s: float | None = None) -> str:
    """Answer a confession (the calm reply when no model can), store it, and for a chat that
    learns, store a learning run for the turn. The model call waits at most `deadline_s`
    (default: the reply deadline)."""
    chat = turn.chat
    duty = duty_for(chat)
    text = text[:MAX_CONFESSION]
    reply = CALM_REPLY
    if duty.model is not None and text.strip():
        outcome = duty.call(
            purpose="confide",
            request=ModelRequest(
                messages=(Message.system(PRIEST_PROMPT), Message.user(text)),
                max_output_tokens=REPLY_MAX_TOKENS,
                material=Material(text=text),
            ),
            deadline_s=reply_deadline_s() if deadline_s is None else deadline_s,
        )
        result = outcome.result if outcome.ok else None
        # A reply the server cut off at its token limit may stop mid-word: unusable.
        if result and result.finish_reason != "length" and (result.content or "").strip():
            reply = (result.content or "").strip()
    with transaction.atomic():
        Confession.objects.create(chat=chat, turn=turn, text=text, reply=reply)
        if duty.learning_on and duty.model is not None:  # [W8]
            learning_run_create(turn=turn)
    return reply
