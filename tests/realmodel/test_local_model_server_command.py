"""[B8] `manage.py local_model_server` (what `make run MODEL=local` runs): starts the local
model server in the background, or reuses one that already answers on the port."""

import json
import os
import signal
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from memorybot import local_model
from tests.realmodel.conftest import free_port

pytestmark = pytest.mark.realmodel


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("local_model_server", *args, stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_a_server_that_answers_on_the_port_is_reused(local_model_server: str) -> None:
    port = local_model_server.removesuffix("/v1").rsplit(":", 1)[1]
    assert run("--port", port) == {
        "baseUrl": local_model_server,
        "model": "openai:smollm2",
        "pid": None,
        "log": None,
    }


def test_it_starts_the_server_in_the_background(
    local_model_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make run PORT=…` exports PORT; the server must still listen where it is told.
    monkeypatch.setenv("PORT", str(free_port()))
    port = free_port()
    started = run("--port", str(port), "--log", str(tmp_path / "server.log"))
    try:
        assert started["baseUrl"] == f"http://127.0.0.1:{port}/v1"
        assert started["model"] == local_model.MODEL and started["pid"] > 0
        assert local_model.answers(started["baseUrl"])
    finally:
        os.kill(started["pid"], signal.SIGTERM)
    for _ in range(60):
        if not local_model.answers(started["baseUrl"]):
            break
        time.sleep(0.5)
    assert not local_model.answers(started["baseUrl"])
