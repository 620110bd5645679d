"""[U1] Signing in to `/me/`: a one-time, signed, expiring link, then a session.

The link carries a random secret signed with a timestamp (`django.core.signing`); the row keeps
only the secret's hash, its expiry and whether it was used. Using it spends it in one `UPDATE`,
so two uses at once sign in once. The session holds the person's and organization's ids only,
and every request checks again that the person is still a member (an erased person or one
removed from the organization is signed out at their next click)."""

import secrets
from datetime import timedelta

from django.core import signing
from django.db import transaction
from django.http import HttpRequest
from django.middleware.csrf import rotate_token
from django.urls import reverse
from django.utils import timezone

from openbot.access import Caller
from openbot.errors import invalid
from openbot.models import Membership, Organization, Person
from openbot.services import member_check, token_hash
from people.models import SignInLink

SALT = "people.sign-in"
SESSION_KEY = "people.caller"
DEFAULT_MINUTES = 15
MAX_MINUTES = 7 * 24 * 60


@transaction.atomic
def sign_in_link_create(
    *, person: Person, organization: Organization, minutes: int = DEFAULT_MINUTES
) -> str:
    """The path of a new sign-in link for a member of `organization`, valid for `minutes`."""
    if not 1 <= minutes <= MAX_MINUTES:
        raise invalid("minutes", f"must be 1 to {MAX_MINUTES} minutes")
    member_check(person=person, organization=organization)
    secret = secrets.token_urlsafe(32)
    # Links that can no longer be used are kept a day (their use shows in the row), then go.
    SignInLink.objects.filter(expires_at__lt=timezone.now() - timedelta(days=1)).delete()
    SignInLink.objects.create(
        key_hash=token_hash(secret),
        person=person,
        organization=organization,
        expires_at=timezone.now() + timedelta(minutes=minutes),
    )
    return reverse("people:sign-in", args=[signing.dumps(secret, salt=SALT)])


def sign_in_link_use(request: HttpRequest, signed: str) -> bool:
    """Spend the link and sign its person in on this session; False when the link is forged,
    expired, already used, or its person is no longer a member."""
    try:
        secret = signing.loads(signed, salt=SALT, max_age=timedelta(minutes=MAX_MINUTES))
    except signing.BadSignature:
        return False
    if not isinstance(secret, str):
        return False
    now = timezone.now()
    links = SignInLink.objects.filter(key_hash=token_hash(secret))
    if not links.filter(used_at__isnull=True, expires_at__gt=now).update(used_at=now):
        return False
    link = links.get()
    if not Membership.objects.filter(
        organization_id=link.organization_id, person_id=link.person_id
    ).exists():
        return False
    # A new session key and CSRF token: a session or token fixed before sign-in does not
    # become the person's (as Django's own `login` does).
    request.session.cycle_key()
    rotate_token(request)
    request.session[SESSION_KEY] = [link.person_id, link.organization_id]
    return True


def signed_in_caller(request: HttpRequest) -> Caller | None:
    """The person signed in on this session, if they are still a member of its organization."""
    ids = request.session.get(SESSION_KEY)
    if not (isinstance(ids, list) and len(ids) == 2):
        return None
    membership = (
        Membership.objects.filter(person_id=ids[0], organization_id=ids[1])
        .select_related("person", "organization")
        .first()
    )
    if membership is None:
        return None
    return Caller(person=membership.person, organization=membership.organization)


def sign_out(request: HttpRequest) -> None:
    request.session.flush()
