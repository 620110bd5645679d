"""`GET /v1/bots/:botId/memory/search?q=&limit=`: relevance search inside the access rule,
thin over `memory.search`. Registered before the memory routes, which would otherwise read
`search` as an entry id."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from memory.apis import reader_of
from memory.search import MAX_QUERY_CHARACTERS, MAX_RESULTS, search
from memory.serializers import MemorySearchOutput
from openbot.paging import query_integer
from openbot.permissions import CanReadBot
from openbot.schema import NOT_BLANK, errors
from openbot.viewsets import ScopedViewSet

DEFAULT_RESULTS = 10


class MemorySearchViewSet(ScopedViewSet):
    """The active entries of a bot's memory that you may see, most relevant first."""

    permission_classes = [IsAuthenticated, CanReadBot]

    @extend_schema(
        operation_id="memory_search",
        parameters=[
            OpenApiParameter(
                "q",
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARACTERS,
                    # No NUL: openbot.middleware refuses it in every parameter.
                    "pattern": NOT_BLANK,
                },
                required=True,
                description="What to look for: at most 1,000 characters and 64 words",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS},
                description=f"At most this many entries (default {DEFAULT_RESULTS})",
            ),
        ],
        responses={
            200: MemorySearchOutput,
            **errors(400, 401, 404),
        },
    )
    def list(self, request: Request, bot_id: str) -> Response:
        """Active entries for you that match `q` by their hashed terms or their meaning, most
        relevant first, each with its `score`."""
        query = request.query_params.get("q", "")
        limit = query_integer(request, "limit", low=1, high=MAX_RESULTS)
        entries, version = search(
            self.bot,
            reader_of(self.caller, self.bot),
            query,
            DEFAULT_RESULTS if limit is None else limit,
        )
        return Response(MemorySearchOutput({"entries": entries, "version": version}).data)
