"""[H2] Bearer-token authentication and the caller of a request."""

import logging
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.db.models.functions import Now
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from openbot.access import Caller
from openbot.compiled import compiled, stand_in
from openbot.models import Membership, Organization, Person, Token
from openbot.services import token_hash, token_mark_used, token_use_stale
from openbot.throttles import AuthFailureThrottle, client_address

logger = logging.getLogger(__name__)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>` that is not expired, for a person who is still a member
    of its organization."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        AuthFailureThrottle().check(request)
        if len(header) != 2:
            raise _refused(request, "a malformed header", "expected 'Bearer <token>'")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError:
            raise _refused(request, "a token that is not UTF-8", "invalid token") from None
        token = _token_of(token_hash(raw))
        if token is None:
            raise _refused(request, "an unknown, expired or revoked token", "invalid token")
        return token.person, token

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


def _refused(request: Request, cause: str, answer: str) -> exceptions.AuthenticationFailed:
    """The 401 for a token refused, logged with the client's address (never the token) and
    counted against it."""
    logger.warning("authentication failed from %s: %s", client_address(request), cause)
    AuthFailureThrottle().note(request)
    return exceptions.AuthenticationFailed(f"Authorization: {answer}")


def caller_of(request: Request) -> Caller:
    token: Token = request.auth  # type: ignore[assignment]
    return Caller(person=token.person, organization=token.organization)


# The fields a request reads of its token's person and organization; the others load if asked.
_PERSON_FIELDS = ("id", "name")
_ORGANIZATION_FIELDS = ("id", "name")


def _token_of(key_hash: str) -> Token | None:
    """[H7] The token with `key_hash`, its person and organization, if it has not expired
    and the person is still a member of its organization; its use is noted at most once a
    minute. One query, compiled once per process."""

    def build() -> QuerySet[Any]:
        member = Membership.objects.filter(
            organization_id=OuterRef("organization_id"), person_id=OuterRef("person_id")
        )
        return (
            Token.objects.filter(key_hash=stand_in("hash"))
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))
            .filter(Exists(member))
            .annotate(stale=ExpressionWrapper(token_use_stale(), output_field=BooleanField()))
            .values(
                "id",
                "stale",
                *(f"person__{name}" for name in _PERSON_FIELDS),
                *(f"organization__{name}" for name in _ORGANIZATION_FIELDS),
            )
        )

    rows = compiled("token", build).rows({stand_in("hash"): key_hash})
    if not rows:
        return None
    row = rows[0]
    alias = connection.alias
    person = Person.from_db(alias, _PERSON_FIELDS, [row[f"person__{f}"] for f in _PERSON_FIELDS])
    organization = Organization.from_db(
        alias, _ORGANIZATION_FIELDS, [row[f"organization__{f}"] for f in _ORGANIZATION_FIELDS]
    )
    token = Token.from_db(
        alias, ("id", "person_id", "organization_id"), [row["id"], person.id, organization.id]
    )
    token.person, token.organization = person, organization
    if row["stale"]:
        token_mark_used(token_id=token.id)
    return token
