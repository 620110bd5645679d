import logging

from django.apps import AppConfig
from django.core.signals import got_request_exception


class OpenbotConfig(AppConfig):
    name = "openbot"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular before any schema is built.
        from openbot import schema  # noqa: F401
        from openbot.outage import QuietRequests, note_request_exception

        # An unreachable database: one 503 and one log line per burst (openbot/outage.py).
        got_request_exception.connect(note_request_exception)
        logging.getLogger("django.request").addFilter(QuietRequests())
