"""Share a bot into another organization: prints {"id"} of the linked bot."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Bot, Organization
from openbot.services import bot_link


class Command(JsonCommand):
    help = "Link a bot into another organization (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bot", required=True)
        parser.add_argument("--org", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        bot = lookup(Bot, options["bot"], "--bot")
        organization = lookup(Organization, options["org"], "--org")
        return {"id": bot_link(bot=bot, organization=organization).id}
