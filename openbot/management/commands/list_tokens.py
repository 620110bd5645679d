"""List a person's tokens: prints {"tokens": [...]}, never a secret."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.clock import to_ms
from openbot.command_output import JsonCommand, lookup
from openbot.models import Person, Token


class Command(JsonCommand):
    help = "List a person's tokens: id, organization, created, last used, expiry."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--person", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        person = lookup(Person, options["person"], "--person")
        tokens = Token.objects.filter(person=person).order_by("pk")
        return {
            "tokens": [
                {
                    "id": token.pk,
                    "organization": token.organization_id,
                    "createdAt": to_ms(token.created_at),
                    "lastUsedAt": to_ms(token.last_used_at) if token.last_used_at else None,
                    "expiresAt": to_ms(token.expires_at) if token.expires_at else None,
                }
                for token in tokens
            ]
        }
