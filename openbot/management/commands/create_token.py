"""Issue a token for a person in an organization: prints {"token"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.management.commands._json import JsonCommand, lookup
from openbot.models import Organization, Person
from openbot.services import token_create


class Command(JsonCommand):
    help = "Issue a bearer token for a person in one of their organizations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--person", required=True)
        parser.add_argument("--org", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        person = lookup(Person, options["person"], "--person")
        organization = lookup(Organization, options["org"], "--org")
        return {"token": token_create(person=person, organization=organization)}
