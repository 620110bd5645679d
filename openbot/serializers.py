"""Input validation shared by every route: unknown fields and non-object bodies are a 400."""

from typing import Any

from rest_framework import serializers
from rest_framework.settings import api_settings


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, naming them with every other fault."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            # A non-field error: the handler names it `body` at the top level, and names the
            # field itself when this serializer is nested in another.
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: ["expected a JSON object"]}
            )
        unknown = {name: ["unknown field"] for name in sorted(set(data) - set(self.fields))}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            # §8: a 400 names every field at fault, not only the first kind of fault found.
            detail = exc.detail
            if not isinstance(detail, dict):
                detail = {api_settings.NON_FIELD_ERRORS_KEY: detail}
            raise serializers.ValidationError({**unknown, **detail}) from None
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON `true`/`false`; refuses "yes", "false", 1 and what else DRF would coerce."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data
