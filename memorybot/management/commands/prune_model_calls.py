"""Blank the requests and results of model calls older than DAYS: prints {"blanked": N}.
The rest of each row (usage, cost, purpose, status, ids) stays for billing and audit."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from memorybot.purge import model_calls_prune
from openbot.command_output import JsonCommand


class Command(JsonCommand):
    help = (
        "Blank the encrypted requests and results of model calls older than DAYS days, in "
        'batches; usage, cost and the rest of each row stay. Prints {"blanked": N}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than", type=int, required=True, metavar="DAYS", help="age in days (>= 1)"
        )

    def run(self, **options: Any) -> dict[str, Any]:
        days = options["older_than"]
        if days < 1:
            raise CommandError("--older-than: must be a positive number of days")
        return {"blanked": model_calls_prune(older_than_days=days)}
