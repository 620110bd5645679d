"""A pass-through between the service and the real model server that keeps both sides.

The service's model calls go to `Recorder.base_url`; each request is sent on to the model
server unchanged and its answer comes back unchanged, so the service deals with exactly what
the server sent. The recorder keeps every request body and the server's answer as the server
wrote it: what the server reported (usage, finish reason, text) is read from here, never from
the service's own reading of it.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass(frozen=True)
class Exchange:
    """One request and the server's answer; `answer` is None when it was not JSON."""

    request: dict[str, Any]
    status: int
    answer: dict[str, Any] | None
    seconds: float

    @property
    def usage(self) -> tuple[int | None, int | None]:
        usage = (self.answer or {}).get("usage") or {}
        return usage.get("prompt_tokens"), usage.get("completion_tokens")

    @property
    def choice(self) -> dict[str, Any]:
        choices = (self.answer or {}).get("choices") or [{}]
        first: dict[str, Any] = choices[0]
        return first


@dataclass
class Recorder:
    upstream: str
    base_url: str = ""
    exchanges: list[Exchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            started = time.monotonic()
            answer = httpx.post(
                recorder.upstream + self.path.removeprefix("/v1"),
                content=raw,
                headers={"Content-Type": "application/json"},
                timeout=900,
            )
            try:
                parsed: Any = answer.json()
            except ValueError:
                parsed = None
            recorder.keep(
                Exchange(
                    request=json.loads(raw),
                    status=answer.status_code,
                    answer=parsed if isinstance(parsed, dict) else None,
                    seconds=time.monotonic() - started,
                )
            )
            try:
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", ""))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the service gave up waiting (its deadline): the answer is kept above

    return Handler


class RecorderServer:
    """Runs a `Recorder` on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self, upstream: str) -> None:
        self.recorder = Recorder(upstream=upstream)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.recorder))
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.recorder.base_url = f"http://{host!s}:{port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self.recorder

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
