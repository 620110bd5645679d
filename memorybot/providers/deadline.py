"""A model call's deadline over the whole HTTP exchange: httpx's timeouts count per step, so
a server that sends one byte a second never times out; here every step of the connection
waits at most for the time left, and none starts after the deadline."""

import ssl
import time
from collections.abc import Iterable
from functools import cache
from typing import Any

import httpcore
import httpx


@cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one loads the CA bundle, too slow to do per call."""
    return httpx.create_ssl_context()


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every step ends by `deadline_at` (a `time.monotonic()` value).

    httpx's timeouts count per step, so a read that gets one byte a second never times out;
    here each step waits at most for the time left, and none starts after the deadline."""

    WRITE_CHUNK = 64 * 1024

    def __init__(self, stream: httpcore.NetworkStream, deadline_at: float) -> None:
        self._stream = stream
        self._deadline_at = deadline_at

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(self._deadline_at, timeout, "read"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), self.WRITE_CHUNK):
            chunk = buffer[start : start + self.WRITE_CHUNK]
            self._stream.write(chunk, _time_left(self._deadline_at, timeout, "write"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._stream.start_tls(ssl_context, server_hostname, left)
        return _DeadlineStream(stream, self._deadline_at)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each wrapped in a `_DeadlineStream`."""

    def __init__(self, deadline_at: float) -> None:
        self._backend = httpcore.SyncBackend()
        self._deadline_at = deadline_at

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline_at)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._backend.connect_unix_socket(path, left, socket_options)
        return _DeadlineStream(stream, self._deadline_at)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


_STEP_TIMEOUTS: dict[str, type[httpcore.TimeoutException]] = {
    "connect": httpcore.ConnectTimeout,
    "read": httpcore.ReadTimeout,
    "write": httpcore.WriteTimeout,
}


def _time_left(deadline_at: float, timeout: float | None, step: str) -> float:
    """How long the next network `step` may wait: the step's own timeout, never past the
    deadline; past it, the step's timeout error (httpx maps it, the SDK reports a timeout)."""
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise _STEP_TIMEOUTS[step]("the model call's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose sockets keep the call's deadline."""

    def __init__(self, deadline_at: float) -> None:
        super().__init__(verify=_ssl_context())
        # httpx takes no network backend; its pool (what `handle_request` uses) does.
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(), network_backend=_DeadlineBackend(deadline_at)
        )
