"""Commands that read every encrypted column in batches (`reencrypt`, `verify_encryption`)."""

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from openbot.command_output import JsonCommand
from openbot.fields import keyring


class EncryptedColumnsCommand(JsonCommand):
    """Takes `--batch-size` and refuses to start without usable OPENBOT_ENCRYPTION_KEYS."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=500, help="rows per batch (default 500)"
        )

    def scan(self, batch_size: int) -> dict[str, Any]:
        raise NotImplementedError

    def run(self, **options: Any) -> dict[str, Any]:
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError("--batch-size: must be a positive integer")
        try:
            keyring()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        return self.scan(batch_size)
