"""Revoke a token by its id (from list_tokens): prints {"revoked": id}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand
from openbot.services import token_revoke


class Command(JsonCommand):
    help = "Revoke a token by its id; the next request with it is a 401."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--token", required=True, type=int, help="the id list_tokens shows")

    def run(self, **options: Any) -> dict[str, Any]:
        token_revoke(token_id=options["token"])
        return {"revoked": options["token"]}
