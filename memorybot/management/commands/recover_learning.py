"""Re-enqueue learning runs whose wait is over, whose worker died or whose message the
broker lost: prints {"enqueued"}. `--now` re-sends every waiting run, queued or not."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memorybot.recovery import recover_learning


class Command(BaseCommand):
    help = (
        "Re-enqueue learning runs whose wait is over, whose worker died or whose message the "
        "broker lost; --now re-sends every waiting run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--now",
            action="store_true",
            help="re-send every waiting run, even one whose message the broker seems to hold",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps({"enqueued": recover_learning(resend=options["now"])}))
