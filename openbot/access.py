"""Who may use which bot: bots are looked up *through* the caller (zulip's access_*_by_id).

Another organization's bot, or a bot you have no grant on, is a 404; a bot you may read but
not change is a 403 on writes.
"""

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from openbot.compiled import compiled, stand_in
from openbot.errors import Forbidden, NotFound
from openbot.models import Bot, Grant, Membership, Organization, Person


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


def grants_of(*, bot_id: str | OuterRef, person_id: str, organization_id: str) -> QuerySet[Grant]:
    """The grants on the bot that reach the person working in `organization_id` [H3]: their own,
    and their organization's while they are a member of it. The membership is an indexed
    `EXISTS` on (organization, person), not a join over every member of the organization."""
    member = Membership.objects.filter(organization_id=organization_id, person_id=person_id)
    return Grant.objects.filter(bot_id=bot_id).filter(
        Q(person_id=person_id) | Q(organization_id=organization_id) & Q(Exists(member))
    )


def _strongest(grants: QuerySet[Grant]) -> QuerySet[Grant, str]:
    """The levels of `grants`, the strongest first ("write" sorts after "read")."""
    return grants.order_by("-level").values_list("level", flat=True)


def bot_level(*, bot: Bot, person_id: str, organization_id: str) -> str | None:
    """The person's grant level on `bot` when working in `organization_id`, or None."""
    if bot.organization_id != organization_id:
        return None
    grants = grants_of(bot_id=bot.id, person_id=person_id, organization_id=organization_id)
    return _strongest(grants).first()


def bots_for_reader(*, person_id: str, organization_id: str) -> QuerySet[Bot]:
    """The bots of `organization_id` the person may read there, by name."""
    grants = grants_of(bot_id=OuterRef("id"), person_id=person_id, organization_id=organization_id)
    return (
        Bot.objects.filter(organization_id=organization_id)
        .filter(Exists(grants))
        .order_by("name", "id")
    )


def ids_values(*, bot_id: str, person_id: str, organization_id: str) -> dict[str, str]:
    """The values of the `bot`, `person` and `org` stand-ins of a compiled query."""
    return {
        stand_in("bot"): bot_id,
        stand_in("person"): person_id,
        stand_in("org"): organization_id,
    }


# The bot's fields a route reads; the others load if asked for.
_BOT_FIELDS = ("id", "organization_id", "name", "source_id", "model")


def _bot_and_level(*, caller: Caller, bot_id: str) -> tuple[Bot, str]:
    """A bot of the caller's organization and the caller's grant level on it, else 404; one
    query, compiled once per process."""

    def build() -> QuerySet[Any]:
        person_id, organization_id = stand_in("person"), stand_in("org")
        grants = grants_of(
            bot_id=stand_in("bot"), person_id=person_id, organization_id=organization_id
        )
        return (
            Bot.objects.filter(id=stand_in("bot"), organization_id=organization_id)
            .annotate(level=Subquery(_strongest(grants)[:1]))
            .values(*_BOT_FIELDS, "level")
        )

    values = ids_values(
        bot_id=bot_id, person_id=caller.person.id, organization_id=caller.organization.id
    )
    rows = compiled("bot_and_level", build).rows(values)
    if not rows or rows[0]["level"] is None:
        raise NotFound(f"bot {bot_id} not found")
    row = rows[0]
    bot = Bot.from_db(connection.alias, _BOT_FIELDS, [row[name] for name in _BOT_FIELDS])
    return bot, row["level"]


def bot_for_reader(*, caller: Caller, bot_id: str) -> Bot:
    """A bot the caller may read (chat with, read memory for them), else 404."""
    return _bot_and_level(caller=caller, bot_id=bot_id)[0]


def bot_for_memory_admin(*, caller: Caller, bot_id: str) -> Bot:
    """[H4] `write` on a bot that is not linked; 404 if unseen, 403 if only read."""
    bot, level = _bot_and_level(caller=caller, bot_id=bot_id)
    if level != Grant.Level.WRITE:
        raise Forbidden("this needs write on the bot")
    if bot.source_id is not None:
        raise Forbidden("this needs write on the bot that is not linked")
    return bot


def organization_for_admin(*, caller: Caller, organization_id: str) -> Organization:
    """[A7] Your own organization, if you are its admin; another one is a 404."""
    if organization_id != caller.organization.id:
        raise NotFound(f"organization {organization_id} not found")
    if not caller.is_admin:
        raise Forbidden("this needs an organization admin")
    return caller.organization
