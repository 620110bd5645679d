"""Create an organization: prints {"id"}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand
from openbot.services import organization_create


class Command(JsonCommand):
    help = "Create an organization."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        return {"id": organization_create(name=options["name"]).id}
