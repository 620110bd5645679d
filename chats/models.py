"""Chats, items and turns, and the shared event log the learning runs wait on."""

from django.db import models

from openbot import ids
from openbot.fields import EncryptedTextField
from openbot.models import Bot, Channel, Organization, Person


def chat_id() -> str:
    return ids.new_id("chat")


class Chat(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=chat_id)
    # The bot row used from this organization: a linked bot when the bot is shared [C1].
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    owner = models.ForeignKey(Person, on_delete=models.CASCADE)
    channel = models.ForeignKey(Channel, null=True, blank=True, on_delete=models.CASCADE)
    test = models.BooleanField(default=False)
    # The sequence number of the newest item; item ids are never reused, even after delete.
    last_seq = models.IntegerField(default=0)
    # Learning has read every item up to this sequence number.
    read_position = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Turn(models.Model):
    """[C3] One turn: its input item, the stored person of the turn, and its end."""

    class Error(models.TextChoices):
        """What went wrong in a turn that still ended: a code, never content."""

        # Stored text the turn needed (a history item, an entry) no key opens.
        UNREADABLE = "unreadable"
        # The bot's model did not answer by its deadline or the turn's.
        TIMEOUT = "timeout"
        # The bot's model failed: an HTTP error, no connection, unusable output, no model.
        MODEL_ERROR = "model_error"
        # Anything else (a bug, a database error).
        INTERNAL = "internal"
        # The process serving it stopped mid-turn; the recovery pass ended it.
        ABANDONED = "abandoned"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="turns")
    # The authenticated person who started it; none for a notice.
    person = models.ForeignKey(Person, null=True, blank=True, on_delete=models.SET_NULL)
    input_seq = models.IntegerField()
    # The sequence number of the turn's last item, set when the turn ends.
    end_seq = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The first thing that went wrong in the turn; empty when nothing did.
    error = models.CharField(max_length=12, choices=Error.choices, blank=True, default="")

    def __str__(self) -> str:
        return f"turn {self.pk} of {self.chat_id}"


class Item(models.Model):
    """[C2] One item of a chat, `i-<seq>`."""

    class Kind(models.TextChoices):
        PERSON = "person"
        BOT = "bot"
        TOOL_CALL = "tool_call"
        TOOL_RESULT = "tool_result"
        NOTICE = "notice"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="items")
    seq = models.IntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    text = EncryptedTextField(blank=True, default="")
    # The app that produced a tool result, and the tool called or answered.
    app = models.CharField(max_length=100, null=True, blank=True)
    tool = models.CharField(max_length=100, null=True, blank=True)
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat", "seq"], name="one_item_per_seq")]

    def __str__(self) -> str:
        return f"{self.chat_id}/i-{self.seq} ({self.kind})"

    @property
    def public_id(self) -> str:
        return f"i-{self.seq}"


class Event(models.Model):
    """The shared event log: durable facts other work waits on (a turn ended)."""

    class Kind(models.TextChoices):
        TURN_ENDED = "turn_ended"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE)
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "turn"], name="one_event_per_turn")]

    def __str__(self) -> str:
        return f"{self.kind} {self.turn_id}"
