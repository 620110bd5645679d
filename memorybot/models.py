"""The record of every model call the memory bot (and a bot's own answer) makes."""

from django.db import models
from django.utils import timezone

from openbot.fields import EncryptedTextField
from openbot.models import Bot, Organization


class ModelCall(models.Model):
    """[B3] One model call: who pays, what it was for, usage and confirmed cost.

    `request` and `result` are encrypted; everything else is metadata that budgets,
    the admin and learning's resume query. `cost_micros` NULL means the cost is unknown
    (the provider confirmed no usage, or no price is configured): such a call is not billed.
    """

    class Purpose(models.TextChoices):
        CONFIDE = "confide"
        ENRICHMENT = "enrichment"
        LEARNING = "learning"
        ANSWER = "answer"

    class Status(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        TIMEOUT = "timeout"
        BUDGET = "budget"
        NO_SLOT = "no_slot"

    # The chat's organization: for a shared bot, model and cost come from it.
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="model_calls"
    )
    # The bot whose memory pool (and settings: budget, concurrency) the call counts against.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="model_calls")
    purpose = models.CharField(max_length=12, choices=Purpose.choices)
    model = models.CharField(max_length=200)
    request = EncryptedTextField()
    result = EncryptedTextField(blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices)
    # The chat the call was made for (none for calls outside a chat): a purge of the chat
    # and a deletion of its history find the call's copies of its items here.
    chat_id = models.CharField(max_length=40, null=True, blank=True, db_index=True)
    # When `request` and `result` were blanked (by a purge, a history deletion or
    # retention); the rest of the row stays for billing and audit.
    blanked_at = models.DateTimeField(null=True, blank=True)
    # Why a call failed, in words that never hold content ("http_status", "timeout", …).
    error_kind = models.CharField(max_length=20, blank=True, default="")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_micros = models.BigIntegerField(null=True, blank=True)
    billed = models.BooleanField(default=False)
    attempt = models.PositiveIntegerField(default=1)
    # The learning step this call belongs to, so a resumed run finds its result.
    step_key = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The spend of a bot in a period: billed calls by bot and time.
            models.Index(
                fields=["bot", "created_at"],
                condition=models.Q(billed=True),
                name="model_call_billed_by_bot",
            ),
            models.Index(fields=["step_key", "attempt"], name="model_call_by_step"),
            # Retention: calls not yet blanked, by age.
            models.Index(
                fields=["created_at"],
                condition=models.Q(blanked_at__isnull=True),
                name="model_call_unblanked_by_time",
            ),
        ]

    # Not a column: set on a call before it is recorded, the entries whose content its
    # request carries; recording the call stores them as `ModelCallEntry` rows.
    carried: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"model call {self.pk} of {self.bot_id} for {self.organization_id}"


class ModelCallEntry(models.Model):
    """An entry whose content a model call carried (in its request, or in its result: a
    learning answer that created it), so a purge finds the call without decrypting it."""

    call = models.ForeignKey(ModelCall, on_delete=models.CASCADE, related_name="entry_rows")
    entry_id = models.CharField(max_length=40, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["call", "entry_id"], name="one_row_per_call_entry")
        ]

    def __str__(self) -> str:
        return f"model call {self.call_id} carried {self.entry_id}"


class Confession(models.Model):
    """[F3] What the bot confided in a turn and the reply it got, both encrypted."""

    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey("chats.Turn", on_delete=models.CASCADE, related_name="+")
    text = EncryptedTextField()
    reply = EncryptedTextField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"confession {self.pk} in {self.chat_id}"


class Enrichment(models.Model):
    """[N5] A rewritten input with the person's words and the entries used, encrypted."""

    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey("chats.Turn", on_delete=models.CASCADE, related_name="+")
    text = EncryptedTextField()
    # Entries from older versions may lack the original.
    original = EncryptedTextField(null=True, blank=True)
    entry_ids = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"enrichment {self.pk} in {self.chat_id}"


class EnrichmentEntry(models.Model):
    """An entry the rewrite was made from, so a purge of it finds (and deletes) the
    enrichment without decrypting anything. These are all the entries the memory bot was
    shown, not only those it named: no check proves which inputs shaped its text."""

    enrichment = models.ForeignKey(Enrichment, on_delete=models.CASCADE, related_name="entry_rows")
    entry_id = models.CharField(max_length=40, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["enrichment", "entry_id"], name="one_row_per_enrichment_entry"
            )
        ]

    def __str__(self) -> str:
        return f"enrichment {self.enrichment_id} used {self.entry_id}"


class LearningRun(models.Model):
    """A durable learning run for one confided turn; all its state lives here."""

    class Status(models.TextChoices):
        WAITING = "waiting"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="+")
    turn = models.OneToOneField("chats.Turn", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.WAITING)
    # The range of items it learns from: after `start_seq`, up to `end_seq` (the turn's end).
    start_seq = models.IntegerField(null=True, blank=True)
    end_seq = models.IntegerField(null=True, blank=True)
    # Waiting for the next budget period.
    not_before = models.DateTimeField(null=True, blank=True)
    # A worker holds the run until then; after it, recovery hands it to another worker.
    leased_until = models.DateTimeField(null=True, blank=True)
    # When a message for it was last sent: recovery does not resend a run still queued.
    sent_at = models.DateTimeField(null=True, blank=True)
    # What the broker keeps that message under, to tell whether it was lost.
    message_key = models.CharField(max_length=64, blank=True, default="")
    # Workers that took the run since it last made progress; too many end it (a run that
    # crashes its worker every time must not be retried forever).
    claims = models.PositiveIntegerField(default=0)

    class Error(models.TextChoices):
        """[A12] Why a run failed or learned nothing: a code, never model output or content."""

        LEARNING_OFF = "learning_off"  # botMemory off or no model for the chat
        BAD_MODEL = "bad_model"  # the model name names no provider OpenBot knows
        BUDGET = "budget"  # the pool's budget is spent
        TIMEOUT = "timeout"  # the step passed its deadline
        NO_SLOT = "no_slot"  # no task slot freed up in time
        MODEL_ERROR = "model_error"  # the model server failed (HTTP error, no connection)
        BAD_OUTPUT = "bad_output"  # the model answered with something unusable
        PURGED = "purged"  # an entry the step was shown was purged while it ran
        GAVE_UP = "gave_up"  # workers kept dying or failing on it

    error = models.CharField(max_length=20, choices=Error.choices, blank=True, default="")
    # How many proposed changes applied (the refused ones are in `refusals`).
    applied = models.PositiveIntegerField(default=0)
    # Refused changes: [{"change": index, "reason": code}].
    refusals = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "not_before"], name="learning_run_due")]

    def __str__(self) -> str:
        return f"learning run {self.pk} ({self.status})"
