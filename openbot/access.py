"""Who may use which bot: bots are looked up *through* the caller (zulip's access_*_by_id).

Another organization's bot, or a bot you have no grant on, is a 404; a bot you may read but
not change is a 403 on writes [H3, H4, §8].
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Exists, Q, QuerySet, Subquery, TextField, Value
from django.db.models.expressions import RawSQL

from openbot.compiled import Compiled, compiled, stand_in
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


def _grants_of(*, bot_id: str, person_id: str, organization_id: str) -> QuerySet[Grant]:
    """The grants on the bot that reach the person working in `organization_id` [H3]: their own,
    and their organization's while they are a member of it. The membership is an indexed
    `EXISTS` on (organization, person), not a join over every member of the organization [Q4]."""
    member = Membership.objects.filter(organization_id=organization_id, person_id=person_id)
    return Grant.objects.filter(bot_id=bot_id).filter(
        Q(person_id=person_id) | Q(organization_id=organization_id) & Q(Exists(member))
    )


def _strongest(grants: QuerySet[Grant]) -> QuerySet[Grant, str]:
    """The levels of `grants`, the strongest first ("write" sorts after "read")."""
    return grants.order_by("-level").values_list("level", flat=True)


def bot_level(*, bot: Bot, person_id: str, organization_id: str) -> str | None:
    """The person's grant level on `bot` when working in `organization_id`, or None [H3]."""
    if bot.organization_id != organization_id:
        return None
    grants = _grants_of(bot_id=bot.id, person_id=person_id, organization_id=organization_id)
    return _strongest(grants).first()


# The bot's fields a route reads; the others load if asked for.
_BOT_FIELDS = ("id", "organization_id", "name", "source_id", "model")


def _bot_and_level(*, caller: Caller, bot_id: str) -> tuple[Bot, str]:
    """A bot of the caller's organization and the caller's grant level on it, else 404; one
    query, compiled once per process [Q4]."""

    def build() -> QuerySet[Any]:
        person_id, organization_id = stand_in("person"), stand_in("org")
        grants = _grants_of(
            bot_id=stand_in("bot"), person_id=person_id, organization_id=organization_id
        )
        return (
            Bot.objects.filter(id=stand_in("bot"), organization_id=organization_id)
            .annotate(level=Subquery(_strongest(grants)[:1]))
            .values(*_BOT_FIELDS, "level")
        )

    values = _ids_values(
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
    """[A4, A5, H4] `write` on a bot that is not linked; 404 if unseen, 403 if only read."""
    bot, level = _bot_and_level(caller=caller, bot_id=bot_id)
    if level != Grant.Level.WRITE:
        raise Forbidden("this needs write on the bot")
    if bot.source_id is not None:
        raise Forbidden("this needs write on the bot that is not linked")
    return bot


def _channels_of(*, person_id: str, organization_id: str) -> QuerySet[ChannelMember, str]:
    return ChannelMember.objects.filter(
        person_id=person_id, channel__organization_id=organization_id
    ).values_list("channel_id", flat=True)


# Stands for "a user of the bot" among channel ids, which never are empty.
_BOT_USER = ""


def _rights_query(*, bot_id: str, person_id: str, organization_id: str) -> QuerySet[Any, str]:
    """The person's channels in the organization, and a `_BOT_USER` row if they use the bot."""
    channels = _channels_of(person_id=person_id, organization_id=organization_id)
    grants = _grants_of(bot_id=bot_id, person_id=person_id, organization_id=organization_id)
    user = (
        Bot.objects.filter(id=bot_id, organization_id=organization_id)
        .filter(Exists(grants))
        .annotate(mark=Value(_BOT_USER))
        .values_list("mark", flat=True)
    )
    return channels.union(user, all=True)


def _rights_compiled() -> Compiled:
    return compiled(
        "rights_of",
        lambda: _rights_query(
            bot_id=stand_in("bot"), person_id=stand_in("person"), organization_id=stand_in("org")
        ),
    )


def _ids_values(*, bot_id: str, person_id: str, organization_id: str) -> dict[str, str]:
    """The values of the `bot`, `person` and `org` stand-ins of a compiled query."""
    return {
        stand_in("bot"): bot_id,
        stand_in("person"): person_id,
        stand_in("org"): organization_id,
    }


def _rights_from(found: Iterable[str]) -> tuple[list[str], bool]:
    found = list(found)
    return [channel for channel in found if channel != _BOT_USER], _BOT_USER in found


# [Q4] The rights last read per (bot, person, organization) in this process: a guess for a
# read that checks them in its own snapshot (`rights_seen`), so that it need not read them
# first. A guess is never an answer: a read whose guess is wrong does not stand [L1, H5].
# Emptied when full (one clear is atomic under threads; evicting one by one is not).
_GUESSES_AT_MOST = 10_000
_guesses: dict[tuple[str, str, str], tuple[frozenset[str], bool]] = {}


def _keep_guess(key: tuple[str, str, str], channels: Iterable[str], bot_user: bool) -> None:
    if len(_guesses) >= _GUESSES_AT_MOST:
        _guesses.clear()
    _guesses[key] = (frozenset(channels), bot_user)


def rights_guess(*, bot: Bot, person_id: str, organization_id: str) -> tuple[frozenset[str], bool]:
    """The person's rights as last read in this process, else read now (`rights_of`)."""
    found = _guesses.get((bot.id, person_id, organization_id))
    if found is not None:
        return found
    channels, bot_user = rights_of(bot=bot, person_id=person_id, organization_id=organization_id)
    return frozenset(channels), bot_user


def rights_of(*, bot: Bot, person_id: str, organization_id: str) -> tuple[list[str], bool]:
    """[H5, H6] The person's channels in the organization now, and whether they use the bot:
    one query, so a read under the pool's lock reads them once [L1], compiled once per
    process [Q4]."""
    if bot.organization_id != organization_id:
        return list(_channels_of(person_id=person_id, organization_id=organization_id)), False
    values = _ids_values(bot_id=bot.id, person_id=person_id, organization_id=organization_id)
    channels, bot_user = _rights_from(row["channel_id"] for row in _rights_compiled().rows(values))
    _keep_guess((bot.id, person_id, organization_id), channels, bot_user)
    return channels, bot_user


# `rights_of`'s rows as one JSON array.
_JOINED = {
    "postgresql": "COALESCE(json_agg({column}), '[]')::text",
    "sqlite": "json_group_array({column})",
}


def rights_seen(*, bot_id: str, person_id: str, organization_id: str) -> RawSQL:
    """[L1] `rights_of` (for a bot of the organization) as a column of another statement, to
    read with `rights_in`: a read of one statement sees contents and rights in one snapshot,
    so it can tell whether the rights it was built for are still the person's there. The ids
    may be stand-ins of a compiled query."""
    query = _rights_compiled()
    column = _JOINED[connection.vendor].format(column=connection.ops.quote_name(query.names[0]))
    values = _ids_values(bot_id=bot_id, person_id=person_id, organization_id=organization_id)
    # Only the compiled query's own SQL is put into the SQL; values stay parameters.
    return RawSQL(  # noqa: S611
        f"SELECT {column} FROM ({query.sql}) AS rights",
        query.params_for(values),
        output_field=TextField(),
    )


def rights_in(
    seen: str, *, bot: Bot, person_id: str, organization_id: str
) -> tuple[frozenset[str], bool]:
    """The channels and use of the bot in a `rights_seen` column, kept as the next guess."""
    channels, bot_user = _rights_from(json.loads(seen))
    _keep_guess((bot.id, person_id, organization_id), channels, bot_user)
    return frozenset(channels), bot_user


def organization_for_admin(*, caller: Caller, organization_id: str) -> Organization:
    """[A7] Your own organization, if you are its admin; another one is a 404."""
    if organization_id != caller.organization.id:
        raise NotFound(f"organization {organization_id} not found")
    if not caller.is_admin:
        raise Forbidden("this needs an organization admin")
    return caller.organization
