"""A person's rights in a bot, as memory's access rule reads them: their channels in
the organization and whether they use the bot (a grant reaches them). Read in one query
(`rights_of`), guessed from the last read in this process (`rights_guess`), and read again as
a column of another statement (`rights_seen`, `rights_in`) so that a read outside the pool's
lock checks them in its own snapshot (`memory.unlocked`).
"""

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Exists, QuerySet, TextField, Value
from django.db.models.expressions import RawSQL

from openbot.access import grants_of, ids_values
from openbot.compiled import Compiled, compiled, stand_in
from openbot.models import Bot, ChannelMember


def _channels_of(*, person_id: str, organization_id: str) -> QuerySet[ChannelMember, str]:
    return ChannelMember.objects.filter(
        person_id=person_id, channel__organization_id=organization_id
    ).values_list("channel_id", flat=True)


# Stands for "a user of the bot" among channel ids, which never are empty.
_BOT_USER = ""


def _rights_query(*, bot_id: str, person_id: str, organization_id: str) -> QuerySet[Any, str]:
    """The person's channels in the organization, and a `_BOT_USER` row if they use the bot."""
    channels = _channels_of(person_id=person_id, organization_id=organization_id)
    grants = grants_of(bot_id=bot_id, person_id=person_id, organization_id=organization_id)
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


def _rights_from(found: Iterable[str]) -> tuple[list[str], bool]:
    found = list(found)
    return [channel for channel in found if channel != _BOT_USER], _BOT_USER in found


# The rights last read per (bot, person, organization) in this process: a guess for a
# read that checks them in its own snapshot (`rights_seen`), so that it need not read them
# first. A guess is never an answer: a read whose guess is wrong does not stand.
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
    one query, so a read under the pool's lock reads them once, compiled once per process."""
    if bot.organization_id != organization_id:
        return list(_channels_of(person_id=person_id, organization_id=organization_id)), False
    values = ids_values(bot_id=bot.id, person_id=person_id, organization_id=organization_id)
    channels, bot_user = _rights_from(row["channel_id"] for row in _rights_compiled().rows(values))
    _keep_guess((bot.id, person_id, organization_id), channels, bot_user)
    return channels, bot_user


# `rights_of`'s rows as one JSON array.
_JOINED = {
    "postgresql": "COALESCE(json_agg({column}), '[]')::text",
    "sqlite": "json_group_array({column})",
}


def rights_seen(*, bot_id: str, person_id: str, organization_id: str) -> RawSQL:
    """`rights_of` (for a bot of the organization) as a column of another statement, to
    read with `rights_in`: a read of one statement sees contents and rights in one snapshot,
    so it can tell whether the rights it was built for are still the person's there. The ids
    may be stand-ins of a compiled query."""
    query = _rights_compiled()
    column = _JOINED[connection.vendor].format(column=connection.ops.quote_name(query.names[0]))
    values = ids_values(bot_id=bot_id, person_id=person_id, organization_id=organization_id)
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
