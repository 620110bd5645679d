import os
import sys

from django.apps import AppConfig


class MemorybotConfig(AppConfig):
    name = "memorybot"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # [W2] `manage.py runserver` runs the learning worker in its serving process (the
        # autoreloader's child), so the embedded setup needs no broker.
        if sys.argv[1:2] == ["runserver"] and os.environ.get("RUN_MAIN") == "true":
            from memorybot.worker import ensure_inprocess_worker

            ensure_inprocess_worker()
