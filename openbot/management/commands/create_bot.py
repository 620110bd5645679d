"""Create a bot in an organization: prints {"id"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization
from openbot.services import bot_create


class Command(JsonCommand):
    help = "Create a bot owned by an organization."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", default="")
        parser.add_argument("--model", default=None, help='the bot\'s own "<provider>:<model>"')

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        bot = bot_create(organization=organization, name=options["name"], model=options["model"])
        return {"id": bot.id}
