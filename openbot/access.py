"""Who may use which bot: bots are looked up *through* the caller (zulip's access_*_by_id).

Another organization's bot, or a bot you have no grant on, is a 404; a bot you may read but
not change is a 403 on writes [H3, H4, §8].
"""

from dataclasses import dataclass

from django.db.models import Q

from openbot.errors import Forbidden, NotFound
from openbot.models import Bot, ChannelMember, Grant, Membership, Organization, Person


@dataclass(frozen=True)
class Caller:
    """The authenticated person and the organization of their token ("your organization")."""

    person: Person
    organization: Organization

    @property
    def is_admin(self) -> bool:
        return Membership.objects.filter(
            organization=self.organization, person=self.person, role=Membership.Role.ADMIN
        ).exists()


def bot_level(*, bot: Bot, person_id: str, organization_id: str) -> str | None:
    """The person's grant level on `bot` when working in `organization_id`, or None [H3]."""
    if bot.organization_id != organization_id:
        return None
    levels = set(
        Grant.objects.filter(bot=bot)
        .filter(
            Q(person_id=person_id)
            | Q(
                organization_id=organization_id,
                organization__membership__person_id=person_id,
            )
        )
        .values_list("level", flat=True)
    )
    if Grant.Level.WRITE in levels:
        return Grant.Level.WRITE
    if Grant.Level.READ in levels:
        return Grant.Level.READ
    return None


def _bot_and_level(*, caller: Caller, bot_id: str) -> tuple[Bot, str]:
    """A bot of the caller's organization and the caller's grant level on it, else 404."""
    bot = Bot.objects.filter(id=bot_id, organization=caller.organization).first()
    level = (
        None
        if bot is None
        else bot_level(bot=bot, person_id=caller.person.id, organization_id=caller.organization.id)
    )
    if bot is None or level is None:
        raise NotFound(f"bot {bot_id} not found")
    return bot, level


def bot_for_reader(*, caller: Caller, bot_id: str) -> Bot:
    """A bot the caller may read (chat with, read memory for them), else 404."""
    return _bot_and_level(caller=caller, bot_id=bot_id)[0]


def bot_for_memory_admin(*, caller: Caller, bot_id: str) -> Bot:
    """[A4, A5, H4] `write` on a bot that is not linked; 404 if unseen, 403 if only read."""
    bot, level = _bot_and_level(caller=caller, bot_id=bot_id)
    if level != Grant.Level.WRITE:
        raise Forbidden("this needs write on the bot")
    if bot.source_id is not None:
        raise Forbidden("this needs write on the bot that is not linked")
    return bot


def is_bot_user(*, bot: Bot, person_id: str, organization_id: str) -> bool:
    """[H6] A person with read on the bot, reading in the bot's organization."""
    return bot_level(bot=bot, person_id=person_id, organization_id=organization_id) is not None


def channel_ids_of(*, person_id: str, organization_id: str) -> list[str]:
    """[H5] The channels the person belongs to now, in that organization."""
    return list(
        ChannelMember.objects.filter(
            person_id=person_id, channel__organization_id=organization_id
        ).values_list("channel_id", flat=True)
    )


def organization_for_admin(*, caller: Caller, organization_id: str) -> Organization:
    """[A7] Your own organization, if you are its admin; another one is a 404."""
    if organization_id != caller.organization.id:
        raise NotFound(f"organization {organization_id} not found")
    if not caller.is_admin:
        raise Forbidden("this needs an organization admin")
    return caller.organization
