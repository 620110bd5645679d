"""Memory-bot routes: the purge, here because it also removes the memory bot's copies of
what it purges; URL, body and answers are those of the memory routes."""

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from memory.serializers import PurgedOutput
from memorybot.purge import memory_purge
from openbot.permissions import CanWriteBot
from openbot.schema import errors
from openbot.serializers import StrictCharField, StrictSerializer
from openbot.viewsets import ScopedViewSet


class MemoryPurgeViewSet(ScopedViewSet):
    """Purge by tag: write on a bot that is not linked."""

    permission_classes = [IsAuthenticated, CanWriteBot]

    class InputSerializer(StrictSerializer):
        # The service refuses other kinds too; the pattern tells clients beforehand.
        tag = StrictCharField(
            max_length=200,
            trim_whitespace=False,
            validators=[RegexValidator(r"^(from|chat|org|channel):[^\x00]*[^:\x00]$")],
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            200: PurgedOutput,
            **errors(400, 401, 403, 404),
        },
    )
    def create(self, request: Request, bot_id: str) -> Response:
        """[A4] Delete every entry with the tag, and every copy of them, without
        reading content; only the count comes back."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        removed = memory_purge(pool_id=self.bot.id, tag=serializer.validated_data["tag"])
        return Response(PurgedOutput({"removed": removed}).data)
