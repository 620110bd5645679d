"""[A8] The OpenAPI schema: component names, the bearer scheme and the documented errors."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers


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


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """[H2] `Authorization: Bearer <token>`."""

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

ERRORS = {
    400: OpenApiResponse(ERROR, description="Bad input; every field at fault is named"),
    401: OpenApiResponse(ERROR, description="No or invalid token"),
    403: OpenApiResponse(ERROR, description="No permission"),
    404: OpenApiResponse(ERROR, description="Unknown or invisible object"),
    409: OpenApiResponse(ERROR, description="Conflict"),
}
