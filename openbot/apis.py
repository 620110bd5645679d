"""[A7] Organization settings for org admins."""

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from openbot.model_names import MAX_MODEL_NAME, MODEL_NAME_PATTERN
from openbot.permissions import IsOrganizationAdmin
from openbot.schema import errors
from openbot.serializers import StrictBooleanField, StrictCharField, StrictSerializer
from openbot.services import organization_settings_update
from openbot.viewsets import ScopedViewSet


class OrganizationSettingsOutput(serializers.Serializer):
    botMemory = serializers.BooleanField(source="bot_memory")
    botMemoryModel = serializers.CharField(source="bot_memory_model", allow_null=True)


class OrganizationSettingsInput(StrictSerializer):
    botMemory = StrictBooleanField(required=False)
    botMemoryModel = StrictCharField(
        required=False,
        allow_null=True,
        max_length=MAX_MODEL_NAME,
        validators=[RegexValidator(MODEL_NAME_PATTERN)],  # [A15] checked by the service too
    )


class OrganizationViewSet(ScopedViewSet):
    """[A7] An organization's settings, for its admins."""

    permission_classes = [IsAuthenticated, IsOrganizationAdmin]
    lookup_url_kwarg = "org_id"

    @extend_schema(responses={200: OrganizationSettingsOutput, **errors(401, 403, 404)})
    # Not named `settings`: that is DRF's `api_settings` on every view.
    @action(detail=True, methods=["get"], url_path="settings")
    def organization_settings(self, request: Request, org_id: str) -> Response:
        """[A7] Whether the memory bot works for the organization, and its model."""
        return Response(OrganizationSettingsOutput(self.organization).data)

    @extend_schema(
        request=OrganizationSettingsInput,
        responses={200: OrganizationSettingsOutput, **errors(400, 401, 403, 404)},
    )
    @organization_settings.mapping.patch
    def organization_settings_update(self, request: Request, org_id: str) -> Response:
        """[A7, A15] Change the fields given; `botMemoryModel: null` clears the model."""
        serializer = OrganizationSettingsInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        organization = organization_settings_update(
            organization=self.organization,
            bot_memory=data.get("botMemory"),
            bot_memory_model=data.get("botMemoryModel"),
            clear_model="botMemoryModel" in data and data["botMemoryModel"] is None,
        )
        return Response(OrganizationSettingsOutput(organization).data)
