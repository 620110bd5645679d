"""[A8, A13] The OpenAPI schema: component names, closed request bodies, the bearer scheme and
the errors each operation can answer."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from openbot.serializers import StrictSerializer

# A string without NUL characters, as a pattern of the schema (ECMA and Python regex alike).
NO_NUL = r"^[^\x00]*$"
# Not blank, and no NUL: some character that is neither space nor NUL.
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"


class AutoSchema(SpectacularAutoSchema):
    """Names a view's nested serializers after the view.

    Every view nests an `InputSerializer` (house style), so by class name alone all of them
    would be one component, "InputRequest", and the schema would be wrong.
    """

    def get_serializer_name(self, serializer: Any, direction: str) -> str:
        owner, _, name = type(serializer).__qualname__.rpartition(".")
        if not owner:
            return name
        view = owner.rpartition(".")[2].removesuffix("Api").removesuffix("ViewSet")
        return f"{view}{name.removesuffix('Serializer')}"

    def get_operation_id(self) -> str:
        """`<basename>_<action>` of the ViewSet, e.g. `memory_list`, `chat_turns`."""
        basename = getattr(self.view, "basename", None)
        action = getattr(self.view, "action", None)
        if basename is None or action is None:
            return str(super().get_operation_id())
        return f"{basename}_{action}".replace("-", "_")

    def _is_list_view(self, serializer: Any = None) -> bool:
        """No operation answers a bare array: a `list` action answers an object such as
        `{"entries": [...]}`, which drf-spectacular would otherwise wrap in an array."""
        return False

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        """A request body that refuses unknown fields says so: no other properties."""
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction != "request":
            return schema
        if isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
        # A request string says it holds no NUL (DRF's CharField refuses NUL, PostgreSQL text
        # cannot hold it); a field with a pattern of its own says so in that pattern.
        for name, field in serializer.fields.items():
            if isinstance(field, serializers.CharField):
                value = schema["properties"][name]
                if value.get("type") == "string" and "pattern" not in value:
                    value["pattern"] = NO_NUL
        return schema


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <token>`."""

    target_class = "openbot.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}


ERROR = inline_serializer(
    name="Error",
    fields={
        "error": inline_serializer(
            name="ErrorBody",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(required=False),
            },
        )
    },
)

ERROR_MEANINGS = {
    400: "Bad input; every field at fault is named",
    401: "No or invalid token",
    403: "No permission: read where write is needed, or not the chat's owner",
    404: "Unknown, or not visible to you: the two are not told apart",
    409: "Conflict",
    429: "Too many requests: try again after `Retry-After` seconds",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The error answers an operation can give, each in the error shape. One that takes a
    token (401) can also be throttled (429): per token, per address, per person's writes."""
    if 401 in codes:
        codes = (*codes, 429)
    return {code: OpenApiResponse(ERROR, description=ERROR_MEANINGS[code]) for code in codes}
