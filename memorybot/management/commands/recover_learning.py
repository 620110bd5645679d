"""[W2] Re-enqueue learning runs whose wait is over or whose worker died: prints {"enqueued"}."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from memorybot.recovery import recover_learning


class Command(BaseCommand):
    help = "Re-enqueue learning runs whose wait is over or whose worker died."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps({"enqueued": recover_learning()}))
