"""Why a person (or a channel's group) may or may not see an entry, as JSON; no content."""

from typing import Any

from django.core.management.base import CommandParser

from memory.explain import explain_access, reader_for
from openbot.command_output import JsonCommand, lookup
from openbot.models import Bot, Person


class Command(JsonCommand):
    help = (
        "Explain whether a person reading through a bot (or the group of a channel) may see an "
        "entry: visible or not, and for the entry and each entry it depends on the first "
        "failing clause of the access rule [V4]. Reads metadata only, never content."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bot", required=True, help="the bot the person reads through")
        reader = parser.add_mutually_exclusive_group(required=True)
        reader.add_argument("--person")
        reader.add_argument("--channel", help="a channel's group, as in its group chats")
        parser.add_argument("--entry", required=True)
        parser.add_argument(
            "--active",
            action="store_true",
            help="active use (context, enrichment, learning) instead of the GET memory view",
        )

    def run(self, **options: Any) -> dict[str, Any]:
        bot = lookup(Bot, options["bot"], "--bot")
        if options["person"] is not None:
            lookup(Person, options["person"], "--person")
        reader = reader_for(bot=bot, person_id=options["person"], channel_id=options["channel"])
        explanation = explain_access(
            pool_id=bot.pool_bot_id,
            reader=reader,
            entry_id=options["entry"],
            active_only=options["active"],
        )
        return {"bot": bot.id, "pool": bot.pool_bot_id, **explanation.to_json()}
