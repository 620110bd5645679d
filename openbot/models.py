"""Tenancy: organizations, people, memberships, tokens, bots, grants, channels; the requests
sent with an `Idempotency-Key`."""

from django.db import models
from django.utils import timezone

from openbot import ids


class Organization(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=ids.organization_id)
    name = models.CharField(max_length=200)
    # [H1] Org settings for the memory bot.
    bot_memory = models.BooleanField(default=True)
    bot_memory_model = models.CharField(max_length=200, null=True, blank=True, default=None)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Person(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=ids.person_id)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Whether learning may use what the person says ("don't learn from me" when false).
    learn_from_me = models.BooleanField(default=True)

    # DRF's IsAuthenticated asks the authenticated principal this.
    is_authenticated = True

    class Meta:
        verbose_name_plural = "people"

    def __str__(self) -> str:
        return self.id


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member"
        ADMIN = "admin"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "person"], name="one_membership")
        ]

    def __str__(self) -> str:
        return f"{self.person_id} in {self.organization_id} ({self.role})"


class Token(models.Model):
    """A bearer token for one person in one organization; only its hash is stored."""

    key_hash = models.CharField(max_length=64, unique=True)
    person = models.ForeignKey(Person, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)
    # None: never expires.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Refreshed at most once a minute, so reads stay reads.
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"token {self.pk} of {self.person_id} in {self.organization_id}"


class Bot(models.Model):
    """[H4] A bot of one organization; a linked bot points at the bot it shares."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.bot_id)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    name = models.CharField(max_length=200, blank=True, default="")
    source = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="links"
    )
    # The bot's own model ("<provider>:<model>"), used to answer in chats.
    model = models.CharField(max_length=200, default="offline:extractive")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id

    @property
    def pool_bot_id(self) -> str:
        """The bot whose memory pool this bot uses."""
        return self.source_id or self.id


class Grant(models.Model):
    class Level(models.TextChoices):
        READ = "read"
        WRITE = "write"

    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="grants")
    level = models.CharField(max_length=5, choices=Level.choices)
    person = models.ForeignKey(Person, null=True, blank=True, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, null=True, blank=True, on_delete=models.CASCADE)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(person__isnull=False, organization__isnull=True)
                    | models.Q(person__isnull=True, organization__isnull=False)
                ),
                name="grant_to_person_or_organization",
            ),
            models.UniqueConstraint(fields=["bot", "person"], name="one_person_grant"),
            models.UniqueConstraint(fields=["bot", "organization"], name="one_org_grant"),
        ]

    def __str__(self) -> str:
        return f"{self.level} on {self.bot_id} for {self.person_id or self.organization_id}"


class Channel(models.Model):
    """A group of people in one organization; membership changes at any time."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.channel_id)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    name = models.CharField(max_length=200, blank=True, default="")
    members = models.ManyToManyField(Person, through="ChannelMember", related_name="channels")
    # Whether learning may use what is said in the channel's group chats.
    learning = models.BooleanField(default=True)

    def __str__(self) -> str:
        return self.id


class ChannelMember(models.Model):
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE)
    person = models.ForeignKey(Person, on_delete=models.CASCADE)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["channel", "person"], name="one_channel_membership")
        ]

    def __str__(self) -> str:
        return f"{self.person_id} in {self.channel_id}"


class IdempotencyKey(models.Model):
    """A request sent with an `Idempotency-Key`, kept 24 hours without its content: keyed
    hashes of the key and of the request, and a reference to what the request made, from which
    a replay renders the answer again (`openbot.idempotency`)."""

    person = models.ForeignKey(Person, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    key_hash = models.CharField(max_length=64)
    # The method, path and body of the request, hashed with a key of the server.
    fingerprint = models.CharField(max_length=64)
    # The status code of the answer, set in the transaction that commits the request's work;
    # null while the request runs.
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    # What the request made (a turn's id, an entry's id); empty when it made nothing to show.
    resource = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["person", "organization", "key_hash"], name="one_request_per_key"
            )
        ]

    def __str__(self) -> str:
        return f"idempotency key {self.pk} of {self.person_id} in {self.organization_id}"
