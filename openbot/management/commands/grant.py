"""Grant read or write on a bot to a person or a whole organization: prints {"ok": true}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Bot, Organization, Person
from openbot.services import grant_set


class Command(JsonCommand):
    help = "Grant read or write on a bot to a person or to all members of an organization."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bot", required=True)
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--person")
        who.add_argument("--org")
        parser.add_argument("--level", required=True, choices=["read", "write"])

    def run(self, **options: Any) -> dict[str, Any]:
        bot = lookup(Bot, options["bot"], "--bot")
        person = lookup(Person, options["person"], "--person") if options["person"] else None
        organization = lookup(Organization, options["org"], "--org") if options["org"] else None
        grant_set(bot=bot, level=options["level"], person=person, organization=organization)
        return {"ok": True}
