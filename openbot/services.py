"""Writes for tenancy: provisioning used by the management commands and the tests."""

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from openbot.errors import ApplicationError, NotFound, invalid
from openbot.model_names import model_name_checked
from openbot.models import (
    Bot,
    Channel,
    ChannelMember,
    Grant,
    Membership,
    Organization,
    Person,
    Token,
)


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def organization_create(*, name: str) -> Organization:
    """Create an organization with default settings."""
    if not name.strip():
        raise invalid("name", "an organization needs a name")
    return Organization.objects.create(name=name)


@transaction.atomic
def person_create(*, organization: Organization, name: str = "", admin: bool = False) -> Person:
    """Create a person who is a member (or admin) of `organization`."""
    person = Person.objects.create(name=name)
    role = Membership.Role.ADMIN if admin else Membership.Role.MEMBER
    Membership.objects.create(organization=organization, person=person, role=role)
    return person


@transaction.atomic
def membership_add(*, organization: Organization, person: Person, admin: bool = False) -> None:
    """Make `person` a member of `organization` (idempotent; `admin` upgrades the role)."""
    membership, _ = Membership.objects.get_or_create(organization=organization, person=person)
    if admin and membership.role != Membership.Role.ADMIN:
        membership.role = Membership.Role.ADMIN
        membership.save(update_fields=["role"])


@transaction.atomic
def membership_remove(*, organization: Organization, person: Person) -> None:
    """Take `person` out of `organization`: its channels, grants and tokens there go too."""
    if not Membership.objects.filter(organization=organization, person=person).exists():
        raise NotFound(
            f"person: {person.id} is not a member of {organization.id}",
            fields={"person": ["not a member of the organization"]},
        )
    ChannelMember.objects.filter(person=person, channel__organization=organization).delete()
    Grant.objects.filter(person=person, bot__organization=organization).delete()
    Token.objects.filter(person=person, organization=organization).delete()
    Membership.objects.filter(organization=organization, person=person).delete()


def member_check(*, person: Person, organization: Organization) -> None:
    """A 400 naming `person` unless they are a member of `organization` (what a token or a
    sign-in link is issued to)."""
    if not Membership.objects.filter(organization=organization, person=person).exists():
        raise ApplicationError(
            f"person: {person.id} is not a member of {organization.id}",
            fields={"person": ["not a member of the organization"]},
        )


@transaction.atomic
def token_create(
    *, person: Person, organization: Organization, expires_in_days: int | None = None
) -> str:
    """[H2] Issue a token; the raw value is returned once and only its hash is stored."""
    if expires_in_days is not None and not 1 <= expires_in_days <= 36_500:
        raise invalid("expires_in", "must be 1 to 36500 days")
    member_check(person=person, organization=organization)
    raw = f"obt_{secrets.token_urlsafe(32)}"
    Token.objects.create(
        key_hash=token_hash(raw),
        person=person,
        organization=organization,
        expires_at=None
        if expires_in_days is None
        else timezone.now() + timedelta(days=expires_in_days),
    )
    return raw


@transaction.atomic
def token_revoke(*, token_id: int) -> None:
    """Revoke a token: the next request with it is a 401."""
    deleted, _ = Token.objects.filter(pk=token_id).delete()
    if not deleted:
        raise NotFound(f"token: no token with id {token_id}", fields={"token": ["not found"]})


# A token's last use is written at most this often.
TOKEN_USE_NOTED_EVERY = timedelta(minutes=1)


def token_use_stale() -> Q:
    """Tokens whose use is to be noted now: never noted, or not for a while."""
    return Q(last_used_at__isnull=True) | Q(last_used_at__lt=Now() - TOKEN_USE_NOTED_EVERY)


def token_mark_used(*, token_id: int) -> None:
    """Note that the token was used now (for tokens `token_use_stale` selects)."""
    Token.objects.filter(pk=token_id).update(last_used_at=timezone.now())


@transaction.atomic
def bot_create(*, organization: Organization, name: str = "", model: str | None = None) -> Bot:
    """Create a bot owned by `organization`."""
    bot = Bot(organization=organization, name=name)
    if model is not None:
        bot.model = model_name_checked(model, field="model")
    bot.save()
    return bot


def bot_model_update(*, bot: Bot, model: str) -> Bot:
    """Change the model a bot answers with."""
    bot.model = model_name_checked(model, field="model")
    bot.save(update_fields=["model"])
    return bot


@transaction.atomic
def bot_link(*, bot: Bot, organization: Organization) -> Bot:
    """Share `bot` into `organization` as a linked bot (idempotent)."""
    source = bot.source or bot
    if source.organization_id == organization.id:
        raise ApplicationError(
            "org: a bot cannot be linked into its own organization",
            fields={"org": ["is the bot's own organization"]},
        )
    linked, _ = Bot.objects.get_or_create(
        source=source,
        organization=organization,
        defaults={"name": source.name, "model": source.model},
    )
    return linked


@transaction.atomic
def grant_set(
    *,
    bot: Bot,
    level: str,
    person: Person | None = None,
    organization: Organization | None = None,
) -> Grant:
    """Give `read` or `write` on `bot` to a person or to all members of an organization."""
    if level not in Grant.Level.values:
        raise ApplicationError("level: must be read or write", fields={"level": ["invalid"]})
    if (person is None) == (organization is None):
        raise ApplicationError("grant goes to exactly one of person or organization")
    if organization is not None and organization.id != bot.organization_id:
        raise ApplicationError(
            "org: grants go to the bot's own organization (link the bot to share it)",
            fields={"org": ["is not the bot's organization"]},
        )
    if (
        person is not None
        and not Membership.objects.filter(
            organization_id=bot.organization_id, person=person
        ).exists()
    ):
        raise ApplicationError(
            "person: is not a member of the bot's organization",
            fields={"person": ["not a member of the bot's organization"]},
        )
    grant, _ = Grant.objects.update_or_create(
        bot=bot, person=person, organization=organization, defaults={"level": level}
    )
    return grant


@transaction.atomic
def grant_revoke(
    *, bot: Bot, person: Person | None = None, organization: Organization | None = None
) -> None:
    """Take back the grant on `bot` of a person or of an organization's members."""
    Grant.objects.filter(bot=bot, person=person, organization=organization).delete()


@transaction.atomic
def channel_create(*, organization: Organization, members: list[Person], name: str = "") -> Channel:
    """Create a channel of members of `organization`."""
    channel = Channel.objects.create(organization=organization, name=name)
    for person in members:
        channel_member_add(channel=channel, person=person)
    return channel


@transaction.atomic
def channel_member_add(*, channel: Channel, person: Person) -> None:
    """Add a member of the channel's organization to the channel (idempotent)."""
    if not Membership.objects.filter(
        organization_id=channel.organization_id, person=person
    ).exists():
        raise NotFound(
            f"person: {person.id} is not a member of the channel's organization",
            fields={"person": ["not a member of the channel's organization"]},
        )
    ChannelMember.objects.get_or_create(channel=channel, person=person)


@transaction.atomic
def channel_member_remove(*, channel: Channel, person: Person) -> None:
    """Take a person out of a channel; every later check sees it at once."""
    ChannelMember.objects.filter(channel=channel, person=person).delete()


def channel_learning_set(*, organization: Organization, channel_id: str, learning: bool) -> Channel:
    """Let learning use what is said in the channel's group chats, or not. What was
    learned before stays (a purge of `channel:<id>` removes it). Another organization's
    channel is a 404."""
    channel = Channel.objects.filter(id=channel_id, organization=organization).first()
    if channel is None:
        raise NotFound(f"channel: {channel_id} not found", fields={"channel": ["not found"]})
    channel.learning = learning
    channel.save(update_fields=["learning"])
    return channel


def person_learning_set(*, person: Person, learn_from_me: bool) -> Person:
    """Let learning use what the person says, or not. What was learned before stays
    (ForgetMine or an erasure removes it)."""
    person.learn_from_me = learn_from_me
    person.save(update_fields=["learn_from_me"])
    return person


@transaction.atomic
def organization_settings_update(
    *,
    organization: Organization,
    bot_memory: bool | None = None,
    bot_memory_model: str | None = None,
    clear_model: bool = False,
) -> Organization:
    """Change `botMemory` and/or `botMemoryModel` (`clear_model` sets it to null)."""
    fields = []
    if bot_memory is not None:
        organization.bot_memory = bot_memory
        fields.append("bot_memory")
    if clear_model:
        organization.bot_memory_model = None
        fields.append("bot_memory_model")
    elif bot_memory_model is not None:
        organization.bot_memory_model = model_name_checked(bot_memory_model, field="botMemoryModel")
        fields.append("bot_memory_model")
    if fields:
        organization.save(update_fields=fields)
    return organization
