from django.apps import AppConfig


class OpenbotConfig(AppConfig):
    name = "openbot"
    default_auto_field = "django.db.models.BigAutoField"
