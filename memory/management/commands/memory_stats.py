"""[O4] Memory stats for a bot: counts by layer, status and topic; never decrypts."""

from typing import Any

from django.core.management.base import CommandParser

from memory.selectors import pool_stats
from openbot.command_output import JsonCommand, lookup
from openbot.models import Bot


class Command(JsonCommand):
    help = (
        "Print counts of a bot's memory entries by layer, by status and by topic. "
        "A linked bot shows the pool of its source bot. No content is read."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bot", required=True)

    def run(self, **options: Any) -> dict[str, Any]:
        bot = lookup(Bot, options["bot"], "--bot")
        return {"bot": bot.id, "pool": bot.pool_bot_id, **pool_stats(pool_id=bot.pool_bot_id)}
