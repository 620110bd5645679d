"""[F9] `Idempotency-Key` on the routes that change things (a turn, a memory command): the same
key from the same person in the same organization within 24 hours answers what the first
request answered and changes nothing. Every refusal is a 409 told apart by its code (§8 has no
other status for a conflict): `idempotency_key_in_use` while the first request runs (retry
later), `idempotency_key_reused` for another request with the key, `idempotency_answer_gone`
once what the first answer showed was removed (do not retry). Without the header a request
runs as it always did.

No content is kept. A key's record holds keyed hashes of the key and of the request (method,
path, body), the status code of the answer and a reference to what the request made (a turn,
an entry). A replay renders the answer again from the rows as they are now, so whatever
removes content (a purge, a Forget, a history deletion) or re-encrypts it (a key rotation)
reaches the replay too; when what the answer showed is gone, the replay shows nothing of it.

The key is claimed in a transaction of its own, committed before the work starts, so a second
request with it finds the claim. The work records what it made in its own transaction
(`Claim.made`): a replay sees both or neither. A claim still empty long after the turn
deadline lost its process and is taken over; `made` checks that the claim is still the
request's own, so a request that lost it commits nothing.
"""

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import Error, IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from openbot.access import Caller
from openbot.errors import Conflict, invalid
from openbot.models import IdempotencyKey
from openbot.schema import ERROR

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
MAX_KEY = 255
WINDOW = timedelta(hours=24)
# A claim still empty this long after the turn deadline lost the process that held it.
STALE_AFTER_DEADLINE_SECONDS = 60.0
# Printable ASCII, no space at either end (HTTP servers drop those); ECMA and Python alike.
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"


class AnswerGone(Conflict):
    """What the first answer showed has been removed since: it is not shown, nor run again."""

    code = "idempotency_answer_gone"

    def __init__(self) -> None:
        super().__init__(
            f"{HEADER}: what the first answer with this key showed has been removed since"
        )


class ClaimLost(Exception):
    """Another request took the key over: the work must not commit."""


def in_use() -> Conflict:
    return Conflict(
        f"{HEADER}: the first request with this key is still running; try again shortly",
        code="idempotency_key_in_use",
    )


class Claim:
    """A request's hold on its key while its work runs; `UNCLAIMED` when it came without one."""

    def __init__(self, record_id: int | None = None, status: int = 0) -> None:
        self.record_id = record_id
        self.status = status

    def made(self, resource: str = "") -> None:
        """Record that the work is done and what it made (an id to render the answer from),
        in the work's own transaction; `ClaimLost` if the key is no longer this request's."""
        if self.record_id is None:
            return
        if not IdempotencyKey.objects.filter(pk=self.record_id, status__isnull=True).update(
            status=self.status, resource=resource
        ):
            raise ClaimLost

    def release(self) -> None:
        """Give the key back after work that failed before it made anything, so that the
        request can be sent again with it. If the database cannot be reached, the claim stays
        until it is taken over as stale."""
        if self.record_id is None:
            return
        try:
            with transaction.atomic():
                IdempotencyKey.objects.filter(pk=self.record_id, status__isnull=True).delete()
        except Error as exc:
            logger.warning(
                "idempotency key %s: not given back (%s)", self.record_id, type(exc).__name__
            )


UNCLAIMED = Claim()


def key_of(request: Request) -> str | None:
    """The request's `Idempotency-Key`, or None without the header; 400 naming it if it is not
    1 to 255 printable ASCII characters (Stripe's convention) with no space at either end."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not (
        0 < len(key) <= MAX_KEY and all(" " <= c <= "~" for c in key) and key == key.strip(" ")
    ):
        raise invalid(
            HEADER, f"must be 1 to {MAX_KEY} printable ASCII characters, no space at either end"
        )
    return key


def _hashed(purpose: str, value: str) -> str:
    """A hash keyed with the server's secret: a key or a body cannot be told from it."""
    return salted_hmac(f"openbot.idempotency.{purpose}", value, algorithm="sha256").hexdigest()


def _fingerprint(request: Request) -> str:
    """The request as the key stands for it: method, path (route and target) and body."""
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"))
    return _hashed("request", f"{request.method} {request.path}\n{body}")


def idempotency_prune() -> int:
    """Delete the records older than 24 hours; how many. Run lazily, before each claim."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - WINDOW).delete()
    return deleted


def _records(caller: Caller, key_hash: str) -> QuerySet[IdempotencyKey]:
    """The caller's record of the key (one at most)."""
    return IdempotencyKey.objects.filter(
        person=caller.person, organization=caller.organization, key_hash=key_hash
    )


def _claim(
    *, caller: Caller, key_hash: str, fingerprint: str, status: int
) -> Claim | IdempotencyKey:
    """Claim the key for the caller, committed before the work starts; or the record of the
    earlier request that holds it. A claim left empty past the turn deadline (and a margin)
    lost its process and is taken over."""
    records = _records(caller, key_hash)
    stale_s = settings.OPENBOT_TURN_DEADLINE_SECONDS + STALE_AFTER_DEADLINE_SECONDS
    records.filter(
        status__isnull=True, created_at__lt=timezone.now() - timedelta(seconds=stale_s)
    ).delete()
    try:
        with transaction.atomic(durable=True):
            record = IdempotencyKey.objects.create(
                person=caller.person,
                organization=caller.organization,
                key_hash=key_hash,
                fingerprint=fingerprint,
            )
        return Claim(record.pk, status)
    except IntegrityError:
        earlier = records.first()
    if earlier is None:  # given back this very moment
        raise in_use()
    return earlier


def _again(
    earlier: IdempotencyKey, fingerprint: str, replay: Callable[[str], Any | None]
) -> Response:
    """The earlier request's answer, rendered again from what it made."""
    if not constant_time_compare(earlier.fingerprint, fingerprint):
        raise Conflict(
            f"{HEADER}: this key came with another request", code="idempotency_key_reused"
        )
    body = None if earlier.status is None else replay(earlier.resource)
    if body is None:
        raise in_use()
    return Response(body, status=earlier.status, headers={"Idempotent-Replayed": "true"})


def idempotent(
    request: Request,
    *,
    caller: Caller,
    status: int,
    work: Callable[[Claim], Any],
    replay: Callable[[str], Any | None],
) -> Response:
    """Answer `status` with what `work` returns, once per `Idempotency-Key`.

    `work` calls `claim.made(resource)` in the transaction that commits what it made.
    `replay` renders that answer again from the resource: None while the work still runs,
    `AnswerGone` once what it showed was removed. Validate the body before: a request refused
    as bad input does not use its key."""
    key = key_of(request)
    if key is None:
        return Response(work(UNCLAIMED), status=status)
    fingerprint = _fingerprint(request)
    idempotency_prune()
    key_hash = _hashed("key", key)
    claim = _claim(caller=caller, key_hash=key_hash, fingerprint=fingerprint, status=status)
    if isinstance(claim, IdempotencyKey):
        return _again(claim, fingerprint, replay)
    try:
        return Response(work(claim), status=status)
    except ClaimLost:
        # Taken over as stale while this request waited: answer as the request that took it.
        taker = _records(caller, key_hash).first()
        if taker is None:
            raise in_use() from None
        return _again(taker, fingerprint, replay)
    except BaseException:
        claim.release()
        raise


IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY, "pattern": KEY_PATTERN},
    location=OpenApiParameter.HEADER,
    description=(
        "[F9] Send the same key again (within 24 hours, same person and organization) and get "
        "the first answer, rendered from what it made as it is now, with nothing changed. "
        "Replays carry `Idempotent-Replayed: true`. A 409 says why not, in its code: "
        "`idempotency_key_in_use` while the first request runs (retry later), "
        "`idempotency_key_reused` for another request with the key, `idempotency_answer_gone` "
        "once what the first answer showed was removed (a history deleted, an entry purged or "
        "forgotten)."
    ),
)
IDEMPOTENCY_ERRORS = {
    409: OpenApiResponse(
        ERROR,
        description="Conflict; with an Idempotency-Key also: the first request with it still "
        "runs, it came with another request, or what its answer showed is gone (see the code)",
    ),
}
