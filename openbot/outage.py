"""[F8] A database that cannot be reached answers 503 on every route, and the log tells the
outage in a few lines rather than a traceback per request.

Views' errors reach `openbot.middleware.AnswerDatabaseUnavailable.process_exception`. An error
raised in another middleware (a session saved after the view) has already been turned into a
500 by Django when it leaves that middleware: `got_request_exception` notes it on the request,
and the same middleware, outside the others, answers the 503 instead. Django's `django.request`
logger would log each of these requests (a 500 with its traceback, then the 503): its records
of a request answered so are dropped, and `OutageLog` says what happened once per burst.
"""

import logging
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse

from openbot.errors import (
    UNAVAILABLE_HEADERS,
    UNAVAILABLE_STATUS,
    database_unreachable,
    unavailable_body,
)

logger = logging.getLogger(__name__)

# Request attributes: the unreachable-database error met, and "leave it out of the log".
_UNREACHABLE = "openbot_database_unreachable"
_QUIET = "openbot_quiet"


class OutageLog:
    """One outage, logged as a burst: a line when the first request is answered 503, a count
    at most every `report_every_s` while it lasts, and one when a query passes again.

    Shared by the threads of a process (each process logs its own bursts)."""

    def __init__(self, *, report_every_s: float) -> None:
        self.report_every_s = report_every_s
        self._lock = threading.Lock()
        self._since: float | None = None  # time.monotonic() of the burst's first 503
        self._reported_at = 0.0
        self._answered = 0

    def answered(self, exc: BaseException) -> None:
        """A request was answered 503 because of `exc`."""
        cause = exc.__cause__ or exc
        with self._lock:
            now = time.monotonic()
            if self._since is None:
                self._since, self._reported_at, self._answered = now, now, 1
                # libpq's first line names the server and what failed; no query, no values.
                first_line = str(cause).strip().partition("\n")[0]
                logger.warning(
                    "database unreachable (%s: %s): answering 503 until it is back",
                    type(cause).__name__,
                    first_line,
                )
                return
            self._answered += 1
            if now - self._reported_at >= self.report_every_s:
                self._reported_at = now
                logger.warning(
                    "database still unreachable after %.0f s: %d requests answered 503",
                    now - self._since,
                    self._answered,
                )

    def watch(self) -> AbstractContextManager[Any]:
        """Around a request: while an outage lasts, the first query that passes ends it."""
        if self._since is None:
            return nullcontext()
        return connection.execute_wrapper(self._passed)

    def _passed(self, execute: Callable[..., Any], *query: Any) -> Any:
        result = execute(*query)
        self.reachable()
        return result

    def reachable(self) -> None:
        """The database answered: the burst, if any, is over."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            logger.warning(
                "database reachable again after %.0f s: %d requests answered 503",
                time.monotonic() - self._since,
                self._answered,
            )
            self._since = None


database_outage = OutageLog(report_every_s=30.0)


def answer_unavailable(request: HttpRequest, exc: BaseException) -> JsonResponse:
    """The 503 for a request whose database could not be reached, noted in the burst."""
    quiet_request_log(request)
    database_outage.answered(exc)
    return JsonResponse(
        unavailable_body("database"), status=UNAVAILABLE_STATUS, headers=UNAVAILABLE_HEADERS
    )


def unreachable_error_of(request: HttpRequest) -> BaseException | None:
    """The unreachable-database error Django turned into this request's 500, if any."""
    exc: BaseException | None = getattr(request, _UNREACHABLE, None)
    return exc


def quiet_request_log(request: HttpRequest) -> None:
    """`django.request` leaves this request's answer (and any traceback of it) out of the log."""
    setattr(request, _QUIET, True)


def note_request_exception(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """`got_request_exception`: Django is about to answer 500 for the error in hand."""
    exc = sys.exc_info()[1]
    if request is not None and exc is not None and database_unreachable(exc):
        setattr(request, _UNREACHABLE, exc)
        quiet_request_log(request)


class QuietRequests(logging.Filter):
    """Drops `django.request`'s records of the requests `quiet_request_log` names."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(getattr(record, "request", None), _QUIET, False)
