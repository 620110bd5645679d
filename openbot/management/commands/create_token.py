"""Issue a token for a person in an organization: prints {"token", "id", "expiresAt"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.clock import to_ms
from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization, Person, Token
from openbot.services import token_create


class Command(JsonCommand):
    help = "Issue a bearer token for a person in one of their organizations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--person", required=True)
        parser.add_argument("--org", required=True)
        parser.add_argument(
            "--expires-in", type=int, metavar="DAYS", help="days until it expires (default: never)"
        )

    def run(self, **options: Any) -> dict[str, Any]:
        person = lookup(Person, options["person"], "--person")
        organization = lookup(Organization, options["org"], "--org")
        raw = token_create(
            person=person, organization=organization, expires_in_days=options["expires_in"]
        )
        token = Token.objects.filter(person=person, organization=organization).latest("pk")
        return {
            "token": raw,
            "id": token.pk,
            "expiresAt": to_ms(token.expires_at) if token.expires_at else None,
        }
