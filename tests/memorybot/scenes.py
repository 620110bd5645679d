"""Scenes for the turn tests: a bot and a memory bot on the fake OpenAI-compatible server,
turns taken over HTTP, and the requests the fake server saw, sorted by who asked.

Every request reaches the fake server as real HTTP; nothing of ours is mocked. The bot's own
model and the memory bot may share the fake server: the system prompt of a request says who
asked (`BOT_PROMPT`, `ENRICH_PROMPT`, `PRIEST_PROMPT`).
"""

import json
from typing import Any

from chats.models import Chat
from conversations.turns import BOT_PROMPT
from memory.models import Entry, Pool
from memory.services import memory_settings_update
from memorybot.confide import PRIEST_PROMPT
from memorybot.enrichment import ENRICH_PROMPT
from memorybot.gateway import CallOutcome, model_call
from memorybot.providers import EntryText, Material, Message, ModelRequest
from openbot import services
from openbot.models import Bot, Organization
from tests.conftest import Actor
from tests.fakes.openai_server import FakeOpenAI, ReceivedRequest

FAKE_MODEL = "openai:gpt-test"
OFFLINE_MODEL = "offline:extractive"


def memory_model_set(organization: Organization, model: str | None) -> None:
    """The organization's `botMemoryModel` [B1] (None: back to null)."""
    services.organization_settings_update(
        organization=organization, bot_memory_model=model, clear_model=model is None
    )
    organization.refresh_from_db()


def bot_model_set(bot: Bot, model: str) -> None:
    """The bot's own model, the one that answers in chats."""
    services.bot_model_update(bot=bot, model=model)


def pool_settings(bot: Bot, **changes: Any) -> None:
    """Change the memory bot's settings [A5] of `bot`'s pool at its current version."""
    pool = Pool.objects.filter(bot_id=bot.pool_bot_id).first()
    memory_settings_update(
        pool_id=bot.pool_bot_id,
        expected=pool.settings_version if pool else 0,
        changes=changes,
    )


def call_carrying(actor: Actor, bot: Bot, entry: Entry) -> CallOutcome:
    """A memory-bot call for `bot`, paid by `actor`'s organization, on the fake server, whose
    request carries `entry` the way an enrichment's request does [P4]."""
    return model_call(
        organization=actor.organization,
        bot=bot,
        purpose="enrichment",
        model=FAKE_MODEL,
        request=ModelRequest(
            messages=(Message.user(entry.content),),
            material=Material(entries=(EntryText(id=entry.id, content=entry.content),)),
        ),
        deadline_s=5,
    )


def chat_open(actor: Actor, bot: Bot, **fields: Any) -> str:
    """`POST /v1/chats` as `actor`; the new chat's id."""
    response = actor.client().post("/v1/chats", {"bot": bot.id, **fields}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def take_turn(actor: Actor, chat_id: str, text: str) -> dict[str, Any]:
    """`POST /v1/chats/:id/turns` as `actor`; the body of the 201."""
    response = actor.client().post(f"/v1/chats/{chat_id}/turns", {"text": text}, format="json")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def chat_of(chat_id: str) -> Chat:
    return Chat.objects.select_related("bot", "organization").get(pk=chat_id)


# --- what the fake server saw ---------------------------------------------------------------


def system_prompt(request: ReceivedRequest) -> str:
    messages = request.body["messages"]
    return str(messages[0]["content"]) if messages and messages[0]["role"] == "system" else ""


def bot_requests(fake: FakeOpenAI) -> list[ReceivedRequest]:
    """Requests of the bot's own model."""
    return [request for request in fake.requests if system_prompt(request) == BOT_PROMPT]


def enrich_requests(fake: FakeOpenAI) -> list[ReceivedRequest]:
    """Requests of the memory bot rewriting an input [N1]."""
    return [request for request in fake.requests if system_prompt(request) == ENRICH_PROMPT]


def confide_requests(fake: FakeOpenAI) -> list[ReceivedRequest]:
    """Requests of the memory bot hearing a confession [F2]."""
    return [request for request in fake.requests if system_prompt(request) == PRIEST_PROMPT]


def memory_bot_requests(fake: FakeOpenAI) -> list[ReceivedRequest]:
    return enrich_requests(fake) + confide_requests(fake)


def last_user_text(request: ReceivedRequest) -> str:
    """The newest user message of a request: the input of the turn for the bot's model."""
    users = [message for message in request.body["messages"] if message["role"] == "user"]
    return str(users[-1]["content"])


def tool_answers(request: ReceivedRequest) -> list[str]:
    """What the bot's tools answered, as the bot's model saw it."""
    return [
        str(message["content"]) for message in request.body["messages"] if message["role"] == "tool"
    ]


def enrichment_answer(text: str, entries: list[str]) -> str:
    """A memory bot's enrichment answer in the shape its duty asks for."""
    return json.dumps({"text": text, "entries": entries})


def confide_call(text: str) -> dict[str, Any]:
    """A scripted answer of the bot's model that calls `confide` with `text`."""
    return {"content": None, "tool_calls": [("confide", {"text": text})]}
