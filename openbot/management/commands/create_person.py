"""Create a person in an organization: prints {"id", "token"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization
from openbot.services import person_create, token_create


class Command(JsonCommand):
    help = "Create a person who is a member (or --admin) of an organization, with a token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--admin", action="store_true")
        parser.add_argument("--name", default="")

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        person = person_create(
            organization=organization, name=options["name"], admin=options["admin"]
        )
        return {"id": person.id, "token": token_create(person=person, organization=organization)}
