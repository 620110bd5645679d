"""[U1] A one-time sign-in link to `/me/` for a person: prints {"url", "expiresInMinutes"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization, Person
from people.services import DEFAULT_MINUTES, sign_in_link_create


class Command(JsonCommand):
    help = "Print a one-time link that signs a person in to their memory page (/me/)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--person", required=True)
        parser.add_argument("--org", required=True)
        parser.add_argument(
            "--minutes",
            type=int,
            default=DEFAULT_MINUTES,
            help=f"minutes until it expires (default {DEFAULT_MINUTES})",
        )
        parser.add_argument(
            "--base",
            default="http://127.0.0.1:8000",
            help="the server's address as people reach it (default http://127.0.0.1:8000)",
        )

    def run(self, **options: Any) -> dict[str, Any]:
        person = lookup(Person, options["person"], "--person")
        organization = lookup(Organization, options["org"], "--org")
        path = sign_in_link_create(
            person=person, organization=organization, minutes=options["minutes"]
        )
        return {"url": options["base"].rstrip("/") + path, "expiresInMinutes": options["minutes"]}
