"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, scripted per test [B2].

Tests queue replies (`server.reply(...)`) and read what arrived (`server.requests`). A request
with no reply queued gets `server.default`. Any path ending in `/chat/completions` answers.
A request whose `response_format` is in `server.refused_forms` gets `server.refusal_status`
(400 or 422; 500 like llama-cpp-python's server) naming `response_format`, and uses up no
reply: a server that cannot constrain its output to that form [K2].
A reply may trickle (the whole HTTP answer, status line first, one byte per `trickle` seconds)
or hang up without answering; `ReceivedRequest.hung_up` says whether the client closed the
connection before the whole answer was sent.

    def test_it(fake_openai):
        fake_openai.reply(content="hi", usage=(10, 5))
        ...
        assert fake_openai.requests[0].body["model"] == "gpt-4o-mini"
"""

import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from memorybot.providers.openai import REFUSED_FORMS


@dataclass
class FakeReply:
    """One scripted answer.

    `usage`: `(prompt_tokens, completion_tokens)` or None for no usage at all; `cost` adds a
    provider-reported `usage.cost` in USD. `tool_calls`: `(name, arguments)` pairs. `raw`
    replaces the whole body (e.g. garbage). `delay` waits before answering. `trickle` sends the
    answer one byte per that many seconds (a server that answers slowly but never stalls);
    `hang_up` closes the connection without answering; `cut_after` sends the status line,
    the headers (announcing the whole body) and that many bytes of the body, then closes.
    """

    content: str | None = "ok"
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = ()
    usage: tuple[int, int] | None = (10, 5)
    cost: float | None = None
    status: int = 200
    delay: float = 0.0
    raw: str | None = None
    trickle: float = 0.0
    hang_up: bool = False
    cut_after: int | None = None

    def body(self, model: str) -> str:
        if self.raw is not None:
            return self.raw
        if self.status >= 400:
            return json.dumps({"error": {"message": "scripted failure", "type": "server_error"}})
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(self.tool_calls)
            ]
        data: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if self.tool_calls else "stop",
                }
            ],
        }
        if self.usage is not None or self.cost is not None:
            usage: dict[str, Any] = {}
            if self.usage is not None:
                usage = {
                    "prompt_tokens": self.usage[0],
                    "completion_tokens": self.usage[1],
                    "total_tokens": sum(self.usage),
                }
            if self.cost is not None:
                usage["cost"] = self.cost
            data["usage"] = usage
        return json.dumps(data)


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: Any
    # The client closed the connection before the whole answer was sent.
    hung_up: bool = False
    # The server refused the request's `response_format`.
    refused: bool = False

    @property
    def answer_form(self) -> str:
        """How the request asked for its answer: `json_schema`, `json_object+schema`,
        `json_object` or `prose` (the names of `memorybot.providers.openai`)."""
        body = self.body if isinstance(self.body, dict) else {}
        asked = body.get("response_format")
        if not isinstance(asked, dict):
            return "prose"
        if asked.get("type") == "json_object" and "schema" in asked:
            return "json_object+schema"
        return str(asked.get("type"))

    @property
    def answer_schema(self) -> Any:
        """The JSON Schema the request asked its answer to follow, if any."""
        body = self.body if isinstance(self.body, dict) else {}
        asked = body.get("response_format") or {}
        return (asked.get("json_schema") or {}).get("schema") or asked.get("schema")


@dataclass
class FakeOpenAI:
    """The server's script and record; `base_url` ends in `/v1` like OpenAI's."""

    base_url: str = ""
    default: FakeReply = field(default_factory=FakeReply)
    requests: list[ReceivedRequest] = field(default_factory=list)
    # The most requests that were being answered at the same moment.
    peak_in_flight: int = 0
    # [K2] The answer forms (`ReceivedRequest.answer_form`) this server refuses, and how.
    refused_forms: set[str] = field(default_factory=set)
    refusal_status: int = 400
    _queue: deque[FakeReply] = field(default_factory=deque)
    _in_flight: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def reply(self, **kwargs: Any) -> FakeReply:
        """Queue the next answer (fields of `FakeReply`)."""
        scripted = FakeReply(**kwargs)
        with self._changed:
            self._queue.append(scripted)
        return scripted

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Block until `count` requests have arrived (True) or `timeout` passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.requests) >= count, timeout)

    def _refuses(self, request: ReceivedRequest) -> bool:
        """Record a request whose answer form this server refuses (True), if it is one."""
        if request.answer_form not in self.refused_forms:
            return False
        request.refused = True
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
        return True

    def _receive(self, request: ReceivedRequest) -> FakeReply:
        with self._changed:
            self.requests.append(request)
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            scripted = self._queue.popleft() if self._queue else self.default
            self._changed.notify_all()
        return scripted

    def wait_until_answered(self, timeout: float = 10.0) -> bool:
        """Block until no request is being answered (True) or `timeout` passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._in_flight == 0, timeout)

    def _done(self) -> None:
        with self._changed:
            self._in_flight -= 1
            self._changed.notify_all()

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            if not self.path.endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": "not found"}}))
                return
            received = ReceivedRequest(
                path=self.path, headers=dict(self.headers.items()), body=body
            )
            if fake._refuses(received):
                refusal = {"message": "this server does not support this response_format"}
                self._send(fake.refusal_status, json.dumps({"error": refusal}))
                return
            scripted = fake._receive(received)
            try:
                if scripted.delay:
                    fake._sleep(scripted.delay)
                if scripted.hang_up:
                    self.close_connection = True
                    return
                model = body.get("model", "") if isinstance(body, dict) else ""
                if scripted.trickle:
                    self._trickle(received, scripted, model)
                else:
                    self._send(scripted.status, scripted.body(model), scripted.cut_after)
            finally:
                fake._done()

        def _send(self, status: int, text: str, cut_after: int | None = None) -> None:
            payload = text.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if cut_after is not None:
                    self.close_connection = True
                    payload = payload[:cut_after]
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

        def _trickle(self, received: ReceivedRequest, scripted: FakeReply, model: str) -> None:
            """The whole answer, status line and headers included, one byte at a time."""
            payload = scripted.body(model).encode()
            head = (
                f"HTTP/1.1 {scripted.status} {HTTPStatus(scripted.status).phrase}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
            )
            self.close_connection = True
            for byte in head.encode() + payload:
                if fake._stopping.is_set():
                    return
                try:
                    self.wfile.write(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    received.hung_up = True
                    return
                fake._sleep(scripted.trickle)

    return Handler


class FakeOpenAIServer:
    """Runs a `FakeOpenAI` on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self) -> None:
        self.fake = FakeOpenAI()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.fake))
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.fake.base_url = f"http://{host!s}:{port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self.fake

    def stop(self) -> None:
        self.fake._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def fake_openai(settings: Settings) -> Iterator[FakeOpenAI]:
    """A running fake server; `OPENBOT_OPENAI_BASE_URL` points at it for this test."""
    server = FakeOpenAIServer()
    fake = server.start()
    # A refusal another test's server answered at the same address is not this server's.
    REFUSED_FORMS.forget()
    settings.OPENBOT_OPENAI_BASE_URL = fake.base_url
    settings.OPENBOT_OPENAI_API_KEY = "test-key"
    try:
        yield fake
    finally:
        server.stop()
