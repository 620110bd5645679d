"""Purge a bot's memory by tag: prints {"removed": N}, like the purge route."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from memorybot.purge import memory_purge
from openbot.command_output import JsonCommand, lookup
from openbot.models import Bot


class Command(JsonCommand):
    help = (
        "Delete, without reading content, every memory entry of a bot with a from:, chat:, "
        "org: or channel: tag, with the observations derived from them, their evidence and "
        "their log payloads, and the copies the memory bot's records hold: model-call "
        "requests and results are blanked, enrichments that used them deleted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bot", required=True, help="the bot that is not linked")
        parser.add_argument(
            "--tag", required=True, help="from:<u>, chat:<id>, org:<o> or channel:<c>"
        )

    def run(self, **options: Any) -> dict[str, Any]:
        bot = lookup(Bot, options["bot"], "--bot")
        if bot.source_id is not None:
            # A linked bot has no pool of its own; the purge belongs to its source bot.
            raise CommandError(
                f"--bot: {bot.id} is a linked bot; purge its source bot {bot.source_id}"
            )
        return {"removed": memory_purge(pool_id=bot.id, tag=options["tag"])}
