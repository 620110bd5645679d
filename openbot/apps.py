from django.apps import AppConfig


class OpenbotConfig(AppConfig):
    name = "openbot"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular before any schema is built [A8].
        from openbot import schema  # noqa: F401
