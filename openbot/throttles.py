"""[T1] Limits on how fast a token may call, a person may write and an address may fail to
authenticate: DRF's rate throttles (a sliding window of request times kept in the cache), each
with its rate from `settings.OPENBOT_THROTTLE_RATES`, read when a request is checked. Beyond
a limit the answer is 429 with `Retry-After` (`openbot.errors`; the page for people answers
its own). The admin (staff sessions) and the worker (no HTTP) are never throttled."""

import logging
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from openbot.models import Token

logger = logging.getLogger(__name__)


def client_address(request: Request | HttpRequest) -> str:
    """The address the request came from: REMOTE_ADDR, or behind `OPENBOT_TRUSTED_PROXY_COUNT`
    proxies the address the outermost of them received it from. Each of them appends that
    address to `X-Forwarded-For`, so the last entries are theirs; what comes before them is
    whatever the client wrote."""
    remote: str = request.META.get("REMOTE_ADDR", "")
    trusted: int = settings.OPENBOT_TRUSTED_PROXY_COUNT
    if not trusted:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    return hops[-trusted] if len(hops) >= trusted and hops[-trusted] else remote


class RatedThrottle(SimpleRateThrottle):
    """A throttle whose rate is the setting's for its scope (None: no limit). A cache that
    cannot be reached lets the request through (logged): a limit is no reason to refuse
    service."""

    def allow_request(self, request: Request, view: Any) -> bool:
        try:
            return super().allow_request(request, view)
        except Exception:  # noqa: BLE001  (the cache's client raises its own errors)
            logger.warning("the throttle cache cannot be reached: %s not counted", self.scope)
            return True

    def get_rate(self) -> str | None:
        rate: str | None = settings.OPENBOT_THROTTLE_RATES[str(self.scope)]
        return rate

    def cache_key(self, ident: object) -> str:
        return self.cache_format % {"scope": self.scope, "ident": ident}


def _token(request: Request) -> Token | None:
    token: Token | None = request.auth  # type: ignore[assignment]  # ours, not DRF's Token
    return token


class TokenThrottle(RatedThrottle):
    """Requests per token."""

    scope = "token"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = _token(request)
        return None if token is None else self.cache_key(token.id)


class WriteThrottle(RatedThrottle):
    """Writes per person, whatever the token: every method but GET, HEAD and OPTIONS."""

    scope = "writes"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = _token(request)
        if request.method in SAFE_METHODS or token is None:
            return None
        return self.cache_key(token.person_id)


class SessionWriteThrottle(WriteThrottle):
    """Writes of a person signed in by a session (the page for people), counted with the
    writes of their tokens."""

    def __init__(self, person_id: str) -> None:
        super().__init__()
        self.person_id = person_id

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return None if request.method in SAFE_METHODS else self.cache_key(self.person_id)


class AuthFailureThrottle(RatedThrottle):
    """Refused tokens per client address: once an address has failed as often as the rate
    allows, every token it sends is refused with 429 until the window has room again."""

    scope = "auth_failures"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_key(client_address(request))

    def check(self, request: Request) -> None:
        """Raise `Throttled` if the address may not try a token now."""
        if self.rate is None:
            return
        count, duration = self.parse_rate(self.rate)
        if count is None or duration is None:
            return
        now = self.timer()
        try:
            history = self.cache.get(self.get_cache_key(request, None), [])
        except Exception:  # noqa: BLE001  (as in allow_request)
            logger.warning("the throttle cache cannot be reached: %s not checked", self.scope)
            return
        failures = [moment for moment in history if moment > now - duration]
        if len(failures) >= count:
            raise exceptions.Throttled(max(0.0, duration - (now - failures[-1])))

    def note(self, request: Request) -> None:
        """Count one failure of the address."""
        if self.rate is not None:
            self.allow_request(request, None)  # type: ignore[arg-type]  # no view needed
