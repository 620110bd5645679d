"""[A7] Organization settings for org admins."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from openbot.access import organization_for_admin
from openbot.auth import caller_of
from openbot.models import Organization
from openbot.schema import ERRORS
from openbot.serializers import StrictBooleanField, StrictCharField, StrictSerializer
from openbot.services import organization_settings_update


class OrganizationSettingsOutput(serializers.Serializer):
    botMemory = serializers.BooleanField(source="bot_memory")
    botMemoryModel = serializers.CharField(source="bot_memory_model", allow_null=True)


def settings_body(organization: Organization) -> dict:
    return dict(OrganizationSettingsOutput(organization).data)


class OrganizationSettingsApi(APIView):
    class InputSerializer(StrictSerializer):
        botMemory = StrictBooleanField(required=False)
        botMemoryModel = StrictCharField(
            required=False, allow_null=True, max_length=200, min_length=1
        )

    @extend_schema(responses={200: OrganizationSettingsOutput, **ERRORS})
    def get(self, request: Request, org_id: str) -> Response:
        organization = organization_for_admin(caller=caller_of(request), organization_id=org_id)
        return Response(settings_body(organization))

    @extend_schema(request=InputSerializer, responses={200: OrganizationSettingsOutput, **ERRORS})
    def patch(self, request: Request, org_id: str) -> Response:
        organization = organization_for_admin(caller=caller_of(request), organization_id=org_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        organization = organization_settings_update(
            organization=organization,
            bot_memory=data.get("botMemory"),
            bot_memory_model=data.get("botMemoryModel"),
            clear_model="botMemoryModel" in data and data["botMemoryModel"] is None,
        )
        return Response(settings_body(organization))
