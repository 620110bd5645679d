"""[H2] Bearer-token authentication and the caller of a request."""

from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from openbot.access import Caller
from openbot.models import Membership, Token
from openbot.services import token_hash, token_mark_used


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>` that is not expired, for a person who is still a member
    of its organization [H2, H7]."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: expected 'Bearer <token>'")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Authorization: invalid token") from None
        # One query: the token, its person and organization, if the person is still a member.
        member = Membership.objects.filter(
            organization_id=OuterRef("organization_id"), person_id=OuterRef("person_id")
        )
        token = (
            Token.objects.select_related("person", "organization")
            .filter(key_hash=token_hash(raw))
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
            .filter(Exists(member))
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Authorization: invalid token")
        token_mark_used(token)
        return token.person, token

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


def caller_of(request: Request) -> Caller:
    token: Token = request.auth  # type: ignore[assignment]
    return Caller(person=token.person, organization=token.organization)
