from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """The top floor: the chat routes, the turn runner, and a person's export and erasure,
    which reach every floor below (chat storage, the memory bot, memory, the platform)."""

    name = "conversations"
