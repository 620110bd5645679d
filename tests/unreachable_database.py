"""[F8] PostgreSQL made unreachable for real: a TCP forwarder on a loopback port of its own in
front of the test database, which stops listening (connections refused), cuts the
connections it carries (lost in the middle of a query) or answers as a server that is
starting up; and the project served over HTTP by Django's WSGI handler in one thread, as
gunicorn serves it (the test client skips the request signals that close broken
connections)."""

import http.client
import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.core.handlers.wsgi import WSGIHandler
from django.db import connection, connections

# The first 4 bytes after the length of an SSLRequest and a GSSENCRequest.
_ENCRYPTION_REQUESTS = (80877103, 80877104)


def _fatal(sqlstate: str, message: str) -> bytes:
    """PostgreSQL's ErrorResponse message for a FATAL error."""
    fields = b"".join(
        kind + text.encode() + b"\0"
        for kind, text in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", message))
    )
    return b"E" + struct.pack("!i", len(fields) + 5) + fields + b"\0"


class Forwarder:
    """Forwards a loopback port to PostgreSQL until told otherwise."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.refusal: bytes | None = None  # what a new connection hears instead, if set
        self._lock = threading.Lock()
        self._carried: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.listen()

    def listen(self) -> None:
        """Accept connections (again) on the same port."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def refuse(self) -> None:
        """Stop listening, and cut every connection carried: PostgreSQL is gone."""
        if self._listener is not None:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            self._listener.close()
            self._listener = None
        self.cut()

    def cut(self) -> None:
        """Cut every connection carried, as a lost network or a killed server does."""
        with self._lock:
            carried, self._carried = self._carried, []
        for pair in carried:
            for end in pair:
                _close(end)

    def starting_up(self) -> None:
        """New connections hear what PostgreSQL says while it starts (57P03)."""
        self.refusal = _fatal("57P03", "the database system is starting up")

    def upstream_ports(self) -> list[int]:
        """The local ports of the connections to PostgreSQL (`pg_stat_activity.client_port`)."""
        with self._lock:
            return [upstream.getsockname()[1] for _, upstream in self._carried]

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self.refusal is not None:
                threading.Thread(target=self._refuse_one, args=(client,), daemon=True).start()
                continue
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._carried.append((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def _refuse_one(self, client: socket.socket) -> None:
        """Answer the startup packet (after declining encryption) with `refusal`."""
        assert self.refusal is not None
        try:
            while True:
                head = client.recv(8, socket.MSG_WAITALL)
                if len(head) < 8:
                    return
                length, code = struct.unpack("!ii", head)
                client.recv(length - 8, socket.MSG_WAITALL)
                if code not in _ENCRYPTION_REQUESTS:
                    client.sendall(self.refusal)
                    return
                client.sendall(b"N")
        finally:
            _close(client)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(sink)


def _close(end: socket.socket) -> None:
    with suppress(OSError):
        end.shutdown(socket.SHUT_RDWR)
    end.close()


@contextmanager
def forwarded_database(**settings: Any) -> Iterator[Forwarder]:
    """New connections of every thread go through a forwarder, with `settings` (say
    `CONN_MAX_AGE`) in the connection settings; this thread's own connection stays direct."""
    shared = connection.settings_dict  # every thread's connection reads this dict
    connection.ensure_connection()
    forwarder = Forwarder((shared["HOST"] or "127.0.0.1", int(shared["PORT"] or 5432)))
    saved = {name: shared.get(name) for name in ("PORT", *settings)}
    shared.update(PORT=str(forwarder.port), **settings)
    try:
        yield forwarder
    finally:
        shared.update(saved)
        forwarder.refuse()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class Served:
    """The project behind Django's WSGI handler, in one thread of its own."""

    def __init__(self) -> None:
        self._server: WSGIServer = make_server("127.0.0.1", 0, WSGIHandler(), handler_class=_Quiet)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._server.serve_forever(poll_interval=0.05)
        finally:
            connections.close_all()  # this thread's connection

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        client = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": "testserver", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        try:
            client.request(method, path, body=data, headers=sent)
            response = client.getresponse()
            return Answer(response.status, dict(response.getheaders()), response.read())
        finally:
            client.close()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@contextmanager
def served() -> Iterator[Served]:
    server = Served()
    try:
        yield server
    finally:
        server.stop()
