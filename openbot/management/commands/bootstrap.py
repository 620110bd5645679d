"""A demo organization, admin, bot and token: prints {"organization", "person", "bot", "token"}.

Idempotent: it reuses the demo organization, person and bot, and issues a new token each run,
revoking the ones it issued before, so only the token printed last is valid. A new demo
uses the offline model; `--model` sets the demo organization's memory-bot model and the demo
bot's own model (`make run MODEL=local` sets the local model, plain `make run` the offline one).
"""

from typing import Any

from django.core.management.base import CommandParser
from django.db import transaction

from openbot.command_output import JsonCommand
from openbot.models import Bot, Membership, Organization, Token
from openbot.services import (
    bot_create,
    bot_model_update,
    grant_set,
    organization_create,
    organization_settings_update,
    person_create,
    token_create,
)

DEMO_NAME = "Demo"
OFFLINE_MODEL = "offline:extractive"


class Command(JsonCommand):
    help = "Create (or reuse) a demo organization, admin, bot and token using the offline model."
    options_of_fields = {"botMemoryModel": "--model"}

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model", help="the demo's model, memory bot and bot alike (a new demo: offline)"
        )

    @transaction.atomic
    def run(self, **options: Any) -> dict[str, Any]:
        organization = Organization.objects.filter(name=DEMO_NAME).order_by("created_at").first()
        if organization is None:
            organization = organization_create(name=DEMO_NAME)
            organization_settings_update(
                organization=organization, bot_memory=True, bot_memory_model=OFFLINE_MODEL
            )
        membership = (
            Membership.objects.filter(organization=organization, role=Membership.Role.ADMIN)
            .select_related("person")
            .first()
        )
        person = (
            membership.person
            if membership
            else person_create(organization=organization, name="Demo Admin", admin=True)
        )
        bot = Bot.objects.filter(organization=organization, source=None).first()
        if bot is None:
            bot = bot_create(organization=organization, name="Demo Bot", model=OFFLINE_MODEL)
            grant_set(bot=bot, level="read", organization=organization)
            grant_set(bot=bot, level="write", person=person)
        if options["model"] is not None:
            organization_settings_update(
                organization=organization, bot_memory_model=options["model"]
            )
            bot_model_update(bot=bot, model=options["model"])
        Token.objects.filter(person=person, organization=organization).delete()
        return {
            "organization": organization.id,
            "person": person.id,
            "bot": bot.id,
            "token": token_create(person=person, organization=organization),
        }
