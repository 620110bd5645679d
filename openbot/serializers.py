"""Input validation shared by every route: unknown fields and non-object bodies are a 400."""

from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, naming them."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"body": ["expected a JSON object"]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
