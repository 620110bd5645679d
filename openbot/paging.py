"""[A10, A16] Paging a list: `limit` and a signed `cursor` in, `nextCursor` out.

Without `limit` a list answers everything, as it always has. With it, a page holds at most
`limit` rows and `nextCursor` (null on the last page). A cursor carries the position of the
last row read, signed with a salt naming the list and its reader, so that another reader's
cursor, or one of another list, is a 400 naming `cursor`."""

from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.core import signing
from django.core.exceptions import ValidationError
from django.db.models import Field, Model, Q, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request

from openbot.errors import invalid
from openbot.schema import NO_NUL

MAX_PAGE = 1000
LIMIT = OpenApiParameter(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    description="A page of at most this many; without it, all come back",
)
CURSOR = OpenApiParameter(
    "cursor",
    {"type": "string", "minLength": 1, "pattern": NO_NUL},
    description="`nextCursor` of the previous page, for you and this list only",
)

Row = TypeVar("Row", bound=Model)
# Where a page ended: the last row's values of the list's order; None on the last page.
Position = list[Any] | None


def query_integer(request: Request, name: str, *, high: int, low: int = 0) -> int | None:
    """An integer query parameter in low..high written in ASCII digits, or None if absent."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    # isascii: str.isdigit() also accepts digits such as "²" that int() refuses.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or not low <= int(raw) <= high:
        raise invalid(name, f"must be an integer from {low} to {high}")
    return int(raw)


def page_limit(request: Request) -> int | None:
    """The `limit` of a page, or None for everything."""
    return query_integer(request, "limit", low=1, high=MAX_PAGE)


def cursor_load(request: Request, salt: str) -> Any:
    """The position the `cursor` parameter carries, signed with `salt`, or None."""
    raw = request.query_params.get("cursor")
    if raw is None:
        return None
    try:
        return signing.loads(raw, salt=salt)
    except signing.BadSignature:
        raise invalid("cursor", "not a cursor of this list for you") from None


def cursor_dump(position: Any, salt: str) -> str | None:
    """The `nextCursor` of a page whose last row is at `position` (None: the last page)."""
    return None if position is None else signing.dumps(position, salt=salt)


def paged(
    request: Request, salt: str, read: Callable[[Any, int | None], tuple[dict[str, Any], Any]]
) -> dict[str, Any]:
    """A page's body: `read(after, limit)` gives the body and where the page ended; with a
    `limit`, `nextCursor` is added, signed with `salt`."""
    limit = page_limit(request)
    body, last = read(cursor_load(request, salt), limit)
    if limit is not None:
        body["nextCursor"] = cursor_dump(last, salt)
    return body


def keyset_page(
    rows: QuerySet[Row], *, order: tuple[str, ...], after: Any, limit: int | None
) -> tuple[QuerySet[Row], Position]:
    """`rows` in `order` (field names, each "-" for descending, all one direction; the last
    unique), from after the position `after`, at most `limit`; and the position of the last
    row when more follow. A position is the row's values of `order`, as JSON keeps them (a
    time as ISO text). The page's keys are read first, so its rows are one query more."""
    names = [name.removeprefix("-") for name in order]
    rows = rows.order_by(*order)
    if after is not None:
        after = _position(rows, names, after)
        step = "lt" if order[0].startswith("-") else "gt"
        later = Q()
        for index, name in enumerate(names):
            equal = dict(zip(names[:index], after, strict=False))
            later |= Q(**equal, **{f"{name}__{step}": after[index]})
        rows = rows.filter(later)
    if limit is None:
        return rows, None
    keys = list(rows.values_list(*names)[: limit + 1])
    page = rows.filter(**{f"{names[-1]}__in": [key[-1] for key in keys[:limit]]})
    if len(keys) <= limit:
        return page, None
    return page, [_json(value) for value in keys[limit - 1]]


def _position(rows: QuerySet[Row], names: list[str], after: Any) -> list[Any]:
    """A cursor's position as the values of `names`; any other shape is a 400 naming
    `cursor` (a signed cursor is ours, but an old one may not match the list any more)."""
    refused = invalid("cursor", "not a cursor of this list for you")
    if not isinstance(after, list) or len(after) != len(names):
        raise refused
    try:
        values = [
            cast("Field[Any, Any]", rows.model._meta.get_field(name)).to_python(value)
            for name, value in zip(names, after, strict=True)
        ]
    except (ValidationError, ValueError, TypeError):
        raise refused from None
    if any(value is None for value in values):
        raise refused
    return values


def _json(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


class PageOutput(serializers.Serializer):
    """A list, and `nextCursor` only when read with a `limit` (null at the end)."""

    nextCursor = serializers.CharField(required=False, allow_null=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        body: dict[str, Any] = super().to_representation(instance)
        if "nextCursor" not in instance:
            del body["nextCursor"]
        return body
