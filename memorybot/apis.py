"""Memory-bot routes: the purge [A4], here because it also removes the memory bot's copies
of what it purges [P4]; URL, body and answers are those of the memory routes."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memorybot.purge import memory_purge
from openbot.access import bot_for_memory_admin
from openbot.auth import caller_of
from openbot.schema import ERRORS
from openbot.serializers import StrictCharField, StrictSerializer


class MemoryPurgeApi(APIView):
    class InputSerializer(StrictSerializer):
        tag = StrictCharField(max_length=200)

    @extend_schema(
        request=InputSerializer,
        responses={
            200: inline_serializer(name="Purged", fields={"removed": serializers.IntegerField()}),
            **ERRORS,
        },
    )
    def post(self, request: Request, bot_id: str) -> Response:
        bot = bot_for_memory_admin(caller=caller_of(request), bot_id=bot_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(
            {"removed": memory_purge(pool_id=bot.id, tag=serializer.validated_data["tag"])}
        )
