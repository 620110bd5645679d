"""Re-key the search index: rewrite every entry's hashed terms under the current index key
(`OPENBOT_INDEX_KEY`, or the one derived from the first encryption key). Run it after changing
either; until it has run, search finds only entries written since the change. It also writes
the vector of every entry that has none, or one no encryption key opens."""

from typing import Any

from django.core.management.base import CommandParser

from memory.index import index_rekey
from memory.vectors import vectors_rebuild
from openbot.command_output import JsonCommand


class Command(JsonCommand):
    help = (
        "Rewrite the search index under the current index key, in batches (progress on "
        "stderr), then write missing vectors. Prints "
        '{"reindexed": N, "unreadable": [ids no encryption key opens], "vectors": N written}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def run(self, **options: Any) -> dict[str, Any]:
        def progress(done: int, total: int) -> None:
            self.stderr.write(f"reindex: {done} of {total} entries")

        result = index_rekey(batch_size=max(options["batch_size"], 1), progress=progress)
        return {
            "reindexed": result.reindexed,
            "unreadable": result.unreadable,
            "vectors": vectors_rebuild(),
        }
