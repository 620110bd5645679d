"""What the memory bot may do for a chat: the organization's model and switches and the
pool's settings, read once per task."""

from dataclasses import dataclass

from chats.models import Chat
from memory.access import Reader
from memory.selectors import pool_settings
from memorybot.budget import BudgetPeriod
from memorybot.gateway import CallOutcome, model_call
from memorybot.providers import ModelRequest
from openbot.models import Bot, Organization

# Enrichment and learning read notes, they do not invent them: the most likely answer,
# the same for the same request (servers default to sampling; llama-cpp-python's at 0.8).
NOTES_TEMPERATURE = 0.0


@dataclass(frozen=True)
class Duty:
    """The memory bot's terms for one chat: who pays, which model, which limits."""

    organization: Organization
    pool_bot: Bot
    # The chat its calls are made for: recorded with each call.
    chat_id: str
    model: str | None
    learning_on: bool
    instructions: str
    concurrency: int | None
    budget_period: BudgetPeriod | None
    budget_limit_micros: int | None
    # `recent` or `relevant`: what enrichment offers the model.
    recall: str

    def call(
        self,
        *,
        purpose: str,
        request: ModelRequest,
        deadline_s: float,
        step_key: str | None = None,
        attempt: int = 1,
    ) -> CallOutcome:
        """One memory-bot model call under these terms (the model must be set)."""
        if self.model is None:
            raise ValueError("the memory bot has no model for this chat [B1]")
        return model_call(
            organization=self.organization,
            bot=self.pool_bot,
            purpose=purpose,
            model=self.model,
            request=request,
            deadline_s=deadline_s,
            concurrency=self.concurrency,
            budget_period=self.budget_period,
            budget_limit_micros=self.budget_limit_micros,
            step_key=step_key,
            attempt=attempt,
            chat_id=self.chat_id,
        )


def duty_for(chat: Chat) -> Duty:
    """[B1] Model and cost come from the chat's organization, limits from the pool."""
    organization = chat.organization
    pool_bot = chat.bot.source or chat.bot
    pool = pool_settings(pool_bot.id)
    return Duty(
        organization=organization,
        pool_bot=pool_bot,
        chat_id=chat.id,
        model=organization.bot_memory_model,
        learning_on=organization.bot_memory and not chat.test,
        instructions=pool.instructions,
        concurrency=pool.concurrency,
        budget_period=pool.budget_period,  # type: ignore[arg-type]
        budget_limit_micros=pool.budget_limit_micros,
        recall=pool.recall,
    )


def reader_of_chat(chat: Chat, person_id: str | None) -> Reader:
    """The readers of an answer: the channel group of a group chat, else the person
    of the turn (the chat's owner when a notice started it).

    A person's rights are not read here: `context` reads them in its own statement or under the
    pool's lock, `validate_references` and `learning_context` under the lock; other callers
    call `as_of_now`."""
    if chat.channel_id is not None:
        return Reader.circle(channel_id=chat.channel_id, organization_id=chat.organization_id)
    return Reader(
        organization_id=chat.organization_id, person_id=person_id or chat.owner_id, bot=chat.bot
    )
