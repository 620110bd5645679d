"""One error shape for every route: `{"error": {"code", "message"[, "fields"]}}` [§8]."""

import math
import sqlite3
from typing import Any

import psycopg
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response


class ApplicationError(Exception):
    """An error a service raises for the caller to see; its message must hold no content."""

    status = 400
    code = "bad_request"

    def __init__(
        self, message: str, *, code: str | None = None, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        if code:
            self.code = code


class NotFound(ApplicationError):
    status = 404
    code = "not_found"


class Forbidden(ApplicationError):
    status = 403
    code = "forbidden"


class Conflict(ApplicationError):
    status = 409
    code = "conflict"


def invalid(field: str, message: str) -> ApplicationError:
    """A 400 that names the field at fault."""
    return ApplicationError(f"{field}: {message}", code="invalid", fields={field: [message]})


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors":
                name = prefix or "body"
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if detail and all(isinstance(item, str) for item in detail):
            return {prefix or "body": [str(item) for item in detail]}
        out = {}
        for index, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}[{index}]" if prefix else f"[{index}]"))
        return out
    return {prefix or "body": [str(detail)]}


def _encodable(text: str) -> str:
    """`text` with lone surrogates escaped: JSON lets a body hold "\\ud800", DRF echoes such
    field names and choices in its messages, and UTF-8 cannot encode them (a 500)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": _encodable(message)}
    if fields:
        error["fields"] = {
            _encodable(str(name)): (
                [_encodable(str(text)) for text in texts] if isinstance(texts, list) else texts
            )
            for name, texts in fields.items()
        }
    return {"error": error}


# What a client hears when the database stayed busy past its timeout: try again soon.
BUSY_STATUS = 503
BUSY_HEADERS = {"Retry-After": "2"}


def database_busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" (or "database table is locked"): another writer
    held the database for longer than the busy timeout. A moment later the request may pass."""
    cause = exc.__cause__
    return (
        isinstance(exc, OperationalError)
        and isinstance(cause, sqlite3.OperationalError)
        and cause.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


def busy_body() -> dict[str, Any]:
    return error_body("busy", "the database is busy: try again shortly")


# What a client hears when a service the request needs cannot be reached: try again soon.
UNAVAILABLE_STATUS = 503
UNAVAILABLE_HEADERS = {"Retry-After": "5"}

# PostgreSQL's errors that say the server cannot be talked to, not what was asked: class 08
# (connection exception) and admin_shutdown, crash_shutdown, cannot_connect_now.
_UNREACHABLE_SQLSTATES = ("57P01", "57P02", "57P03")


def database_unreachable(exc: BaseException) -> bool:
    """PostgreSQL cannot be reached: a connection refused or lost, a server shutting down
    or starting up. psycopg's OperationalError without a SQLSTATE is libpq's report of the
    connection: no connection made (refused; or turned away by the server, whatever the
    reason, from "starting up" to "too many clients" or a wrong password, which libpq reports
    without a SQLSTATE), or the server gone in the middle of a query. A lock or statement
    timeout, or any error about the statement, is not this."""
    cause = exc.__cause__
    django_error = isinstance(exc, OperationalError | InterfaceError)
    if not django_error or not isinstance(cause, psycopg.Error):
        return False
    if cause.sqlstate is None:
        return isinstance(cause, psycopg.OperationalError)
    return cause.sqlstate.startswith("08") or cause.sqlstate in _UNREACHABLE_SQLSTATES


def unavailable_body(dependency: str) -> dict[str, Any]:
    return error_body("unavailable", f"{dependency} unreachable")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if database_busy(exc):
        return Response(busy_body(), status=BUSY_STATUS, headers=BUSY_HEADERS)
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        return Response(error_body("invalid", message, fields), status=400)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("too_large", "body: the request body is too large"), status=413)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return Response(
            error_body("unauthenticated", str(exc.detail)),
            status=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    if isinstance(exc, exceptions.Throttled):
        wait = max(1, math.ceil(getattr(exc, "wait", None) or 1))
        return Response(
            error_body("throttled", f"too many requests: try again in {wait} s"),
            status=429,
            headers={"Retry-After": str(wait)},
        )
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "not found"), status=404)
    if isinstance(exc, PermissionDenied):
        return Response(error_body("forbidden", "no permission"), status=403)
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if isinstance(exc, exceptions.ParseError | exceptions.UnsupportedMediaType):
            message = f"body: {message}"
        return Response(error_body(str(code), str(message)), status=exc.status_code)
    return None


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", "not found"), status=404)


def server_error_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("server_error", "internal error"), status=500)
