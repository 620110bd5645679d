from django.apps import AppConfig


class MemorybotConfig(AppConfig):
    name = "memorybot"
    default_auto_field = "django.db.models.BigAutoField"
