"""Organization settings and channels for org admins; a person's own settings; the health
endpoints for operators."""

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from openbot.auth import caller_of
from openbot.errors import UNAVAILABLE_HEADERS, UNAVAILABLE_STATUS, unavailable_body
from openbot.health import unready_dependencies
from openbot.model_names import MAX_MODEL_NAME, MODEL_NAME_PATTERN
from openbot.outage import quiet_request_log
from openbot.permissions import IsOrganizationAdmin
from openbot.schema import errors
from openbot.serializers import StrictBooleanField, StrictCharField, StrictSerializer
from openbot.services import (
    channel_learning_set,
    organization_settings_update,
    person_learning_set,
)
from openbot.viewsets import ScopedViewSet


class HealthProbeApi(APIView):
    """A probe for operators: no token, no throttle, not in the API's schema."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []


class LivenessApi(HealthProbeApi):
    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        """The process serves requests; the database is not asked."""
        return Response({"status": "ok"})


class ReadinessApi(HealthProbeApi):
    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        """The database and the broker answer; a 503 names which does not, nothing else."""
        unready = unready_dependencies()
        if unready:
            # The probe's answer, not this server's failure: no log line per probe.
            quiet_request_log(request._request)
            return Response(
                unavailable_body(" and ".join(unready)),
                status=UNAVAILABLE_STATUS,
                headers=UNAVAILABLE_HEADERS,
            )
        return Response({"status": "ready"})


class OrganizationSettingsOutput(serializers.Serializer):
    botMemory = serializers.BooleanField(source="bot_memory")
    botMemoryModel = serializers.CharField(source="bot_memory_model", allow_null=True)


class OrganizationSettingsInput(StrictSerializer):
    botMemory = StrictBooleanField(required=False)
    botMemoryModel = StrictCharField(
        required=False,
        allow_null=True,
        max_length=MAX_MODEL_NAME,
        validators=[RegexValidator(MODEL_NAME_PATTERN)],  # checked by the service too
    )


class ChannelOutput(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    learning = serializers.BooleanField()


class ChannelInput(StrictSerializer):
    learning = StrictBooleanField()


class MySettingsOutput(serializers.Serializer):
    learnFromMe = serializers.BooleanField(source="learn_from_me")


class MySettingsInput(StrictSerializer):
    learnFromMe = StrictBooleanField()


class MySettingsApi(APIView):
    """The token's person's own settings."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: MySettingsOutput, **errors(401)})
    def get(self, request: Request) -> Response:
        """Whether learning may use what you say."""
        return Response(MySettingsOutput(caller_of(request).person).data)

    @extend_schema(request=MySettingsInput, responses={200: MySettingsOutput, **errors(400, 401)})
    def patch(self, request: Request) -> Response:
        """`learnFromMe: false`: learning neither receives nor applies what you say, in
        every chat; what was learned before stays (ForgetMine removes it)."""
        serializer = MySettingsInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        person = person_learning_set(
            person=caller_of(request).person,
            learn_from_me=serializer.validated_data["learnFromMe"],
        )
        return Response(MySettingsOutput(person).data)


class OrganizationViewSet(ScopedViewSet):
    """An organization's settings, for its admins."""

    permission_classes = [IsAuthenticated, IsOrganizationAdmin]
    lookup_url_kwarg = "org_id"

    @extend_schema(responses={200: OrganizationSettingsOutput, **errors(401, 403, 404)})
    # Not named `settings`: that is DRF's `api_settings` on every view.
    @action(detail=True, methods=["get"], url_path="settings")
    def organization_settings(self, request: Request, org_id: str) -> Response:
        """Whether the memory bot works for the organization, and its model."""
        return Response(OrganizationSettingsOutput(self.organization).data)

    @extend_schema(
        request=OrganizationSettingsInput,
        responses={200: OrganizationSettingsOutput, **errors(400, 401, 403, 404)},
    )
    @organization_settings.mapping.patch
    def organization_settings_update(self, request: Request, org_id: str) -> Response:
        """Change the fields given; `botMemoryModel: null` clears the model."""
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

    @extend_schema(
        request=ChannelInput, responses={200: ChannelOutput, **errors(400, 401, 403, 404)}
    )
    @action(detail=True, methods=["patch"], url_path="channels/(?P<channel_id>[^/]+)")
    def channel_update(self, request: Request, org_id: str, channel_id: str) -> Response:
        """`learning: false`: learning neither receives nor applies what is said in the
        channel's group chats; what was learned before stays."""
        serializer = ChannelInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        channel = channel_learning_set(
            organization=self.organization,
            channel_id=channel_id,
            learning=serializer.validated_data["learning"],
        )
        return Response(ChannelOutput(channel).data)
