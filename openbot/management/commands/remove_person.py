"""End a person's membership of an organization: prints {"removed": true}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization, Person
from openbot.services import membership_remove


class Command(JsonCommand):
    help = "End a membership: the person's channels, grants and tokens there go too."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--person", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        person = lookup(Person, options["person"], "--person")
        membership_remove(organization=organization, person=person)
        return {"removed": True}
