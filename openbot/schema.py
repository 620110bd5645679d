"""[A8] Error responses every route documents in the OpenAPI schema."""

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

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
