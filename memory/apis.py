"""Memory routes: one ViewSet, thin over memory.selectors and memory.services. The purge
route lives in `memorybot.apis`: it also removes the memory bot's copies."""

import unicodedata
from collections.abc import Callable
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from memory.access import Reader
from memory.forgetting import Forgotten, entries_forget_mine, entry_forget
from memory.models import Pool
from memory.rows import entry_row
from memory.selectors import (
    change_log,
    entry_for_reader,
    entry_page_for_reader,
    pool_settings,
)
from memory.serializers import (
    EntryOutput,
    ForgetMineOutput,
    ForgottenOutput,
    MemoryListOutput,
    MemoryLogOutput,
)
from memory.services import (
    REMEMBER_MAX_CONTENT,
    check_topics,
    entry_remember,
    memory_settings_update,
)
from memory.topics import TOPIC_MAX_LENGTH, TOPIC_SHAPE
from openbot.access import Caller
from openbot.errors import NotFound, invalid
from openbot.idempotency import (
    IDEMPOTENCY_ERRORS,
    IDEMPOTENCY_KEY,
    AnswerGone,
    Claim,
    idempotent,
)
from openbot.models import Bot
from openbot.paging import CURSOR, LIMIT, paged, query_integer
from openbot.permissions import CanReadBot, CanWriteBot
from openbot.schema import NO_NUL, NOT_BLANK, errors
from openbot.serializers import StrictCharField, StrictSerializer
from openbot.viewsets import ScopedViewSet

# A time in ms since the epoch: before the year 10000.
MAX_MS = 253_402_300_799_999


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer; refuses strings ("2") and floats (2.0) that DRF would coerce."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "string",
        "pattern": TOPIC_SHAPE,
        # Beyond ASCII the pattern takes any character; the format names the rule that
        # decides (the schemathesis hooks of CI generate topics by it).
        "format": "topic",
        "maxLength": TOPIC_MAX_LENGTH,
        "description": "A topic [E3, E9]: lowercase letters of any script, digits and single "
        "inner hyphens, in NFC (stored normalized); an uppercase letter is refused",
    }
)
class TopicField(StrictCharField):
    """A topic; `check_topics` says which are (colon tags belong to OpenBot)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)


class RememberCommand(StrictSerializer):
    """Add a pinned entry only you see."""

    _tag = serializers.ChoiceField(["Remember"], label="_tag")
    # Stripped of surrounding whitespace; the pattern says what is left is not blank (and,
    # like every string, holds no NUL). What is left fits the enrichment context.
    content = StrictCharField(
        max_length=REMEMBER_MAX_CONTENT, validators=[RegexValidator(NOT_BLANK)]
    )
    tags = serializers.ListField(
        child=TopicField(max_length=TOPIC_MAX_LENGTH), required=False, max_length=32
    )
    saidAt = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=MAX_MS,
        help_text="When it was said (ms since the epoch), if not now",
    )


class ForgetCommand(StrictSerializer):
    """Take back your part of an entry."""

    _tag = serializers.ChoiceField(["Forget"], label="_tag")
    id = StrictCharField(max_length=40, trim_whitespace=False)


class ForgetMineCommand(StrictSerializer):
    """Take back your part of every entry you are behind and may see, in one change."""

    _tag = serializers.ChoiceField(["ForgetMine"], label="_tag")


COMMANDS: dict[str, type[StrictSerializer]] = {
    "Remember": RememberCommand,
    "Forget": ForgetCommand,
    "ForgetMine": ForgetMineCommand,
}
# A tagged union: `_tag` says which command the object is.
COMMAND = PolymorphicProxySerializer(
    component_name="MemoryCommand",
    serializers=dict(COMMANDS.items()),
    resource_type_field_name="_tag",
)


def reader_of(caller: Caller, bot: Bot) -> Reader:
    # Not `Reader.person`: every selector and service reads the reader's rights again,
    # under the pool's lock (`as_of_now`) or in a read's own statement (`as_guessed`), so
    # rights read here would only be read twice.
    return Reader(organization_id=caller.organization.id, person_id=caller.person.id, bot=bot)


# A version fits 18 digits (PostgreSQL's bigint holds 19).
MAX_VERSION = 10**18 - 1


def cursor_salt(view: "MemoryViewSet", kind: str) -> str:
    """A cursor is signed for one reader and one bot: another's does not open."""
    caller = view.caller
    return f"memory.{kind}.cursor:{view.bot.id}:{caller.organization.id}:{caller.person.id}"


class BudgetSerializer(StrictSerializer):
    period = serializers.ChoiceField(["day", "month"])
    limitMicros = StrictIntegerField(min_value=0, max_value=10**15)


class MemoryBotOutput(serializers.Serializer):
    version = serializers.IntegerField(source="settings_version")
    instructions = serializers.CharField()
    concurrency = serializers.IntegerField(allow_null=True)
    budget = serializers.SerializerMethodField()
    recall = serializers.ChoiceField(Pool.Recall.values)

    def get_budget(self, pool: Pool) -> dict[str, Any] | None:
        if pool.budget_period is None:
            return None
        return {"period": pool.budget_period, "limitMicros": pool.budget_limit_micros}


class MemoryBotInput(StrictSerializer):
    expected = StrictIntegerField(min_value=0, max_value=2**31 - 1)
    instructions = StrictCharField(required=False, allow_blank=True, max_length=10_000)
    concurrency = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=1000)
    budget = BudgetSerializer(required=False, allow_null=True)
    # What enrichment offers the model: the newest entries, or those matching the input.
    recall = serializers.ChoiceField(Pool.Recall.values, required=False)


class MemoryViewSet(ScopedViewSet):
    """A bot's memory as the caller may see it, and its settings."""

    permission_classes = [IsAuthenticated, CanReadBot]
    lookup_url_kwarg = "entry_id"

    class InputSerializer(StrictSerializer):
        command = serializers.DictField()

    class BodySerializer(StrictSerializer):
        """What `InputSerializer` and the commands accept, as the schema shows it."""

        command = COMMAND

    def _page(
        self,
        output: type[serializers.Serializer],
        kind: str,
        key: str,
        read: Callable[[Reader, Any, int | None], tuple[list[Any], int, Any]],
    ) -> Response:
        """[A10] A page of a list: `read(reader, after, limit)` gives its items, the version and
        the last place read; read with a `limit`, the body has `nextCursor` too (null at the
        end), signed for this reader and bot."""
        reader = reader_of(self.caller, self.bot)

        def listed(after: Any, limit: int | None) -> tuple[dict[str, Any], Any]:
            items, version, last = read(reader, after, limit)
            return {key: items, "version": version}, last

        return Response(output(paged(self.request, cursor_salt(self, kind), listed)).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "tags",
                {"type": "string", "pattern": NO_NUL},
                description="Comma-separated; entries with all of them (at most 32)",
            ),
            LIMIT,
            CURSOR,
        ],
        responses={200: MemoryListOutput, **errors(400, 401, 404)},
    )
    def list(self, request: Request, bot_id: str) -> Response:
        """[A1] Entries for you in your organization, the history included, in memory
        order; `tags` keeps entries with all of them. Page with `limit` and `cursor`."""
        raw_tags = request.query_params.get("tags", "")
        # Topics are stored in NFC: a tag written decomposed finds them too.
        tags = [unicodedata.normalize("NFC", tag.strip()) for tag in raw_tags.split(",")]
        tags = [tag for tag in tags if tag]
        if len(tags) > 32 or any(len(tag) > 200 for tag in tags):
            raise invalid("tags", "at most 32 tags of at most 200 characters")
        return self._page(
            MemoryListOutput,
            "entries",
            "entries",
            lambda reader, after, limit: entry_page_for_reader(
                pool_id=self.bot.pool_bot_id,
                reader=reader,
                tags=tags,
                after=None if after is None else (after[0], after[1], after[2]),
                limit=limit,
            ),
        )

    @extend_schema(responses={200: EntryOutput, **errors(401, 404)})
    def retrieve(self, request: Request, bot_id: str, entry_id: str) -> Response:
        """[A11] One entry; unknown and invisible are the same 404: existence is not revealed."""
        entry = entry_for_reader(
            pool_id=self.bot.pool_bot_id, reader=reader_of(self.caller, self.bot), entry_id=entry_id
        )
        if entry is None:
            raise NotFound(f"entry {entry_id} not found")
        return Response(EntryOutput(entry).data)

    @extend_schema(
        request=BodySerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            201: OpenApiResponse(EntryOutput, description="Remember: the new pinned entry"),
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="MemoryForgotten",
                    serializers=[ForgottenOutput, ForgetMineOutput],
                    resource_type_field_name=None,
                ),
                description="Forget: your part is taken back; ForgetMine: how many entries were "
                "retracted and how many you were excluded from, and the version",
            ),
            **errors(400, 401, 404),
            **IDEMPOTENCY_ERRORS,
        },
    )
    def create(self, request: Request, bot_id: str) -> Response:
        """[A2] `Remember` adds a pinned entry only you see (201); `Forget` takes back
        your part of an entry (200), or 409 if it is not for you; `ForgetMine` takes back your
        part of every entry you are behind and may see, in one change (200). With an
        `Idempotency-Key`, a retry answers the same and changes nothing."""
        caller, bot = self.caller, self.bot
        outer = self.InputSerializer(data=request.data)
        outer.is_valid(raise_exception=True)
        raw = outer.validated_data["command"]
        kind = COMMANDS.get(raw["_tag"]) if isinstance(raw.get("_tag"), str) else None
        if kind is None:
            raise invalid("command._tag", "must be one of " + ", ".join(f'"{t}"' for t in COMMANDS))
        command_input = kind(data=raw)
        if not command_input.is_valid():
            raise serializers.ValidationError({"command": command_input.errors})
        command: dict[str, Any] = command_input.validated_data
        pool_id, reader = bot.pool_bot_id, reader_of(caller, bot)
        if kind is ForgetCommand:
            forgotten = ForgottenOutput({"ok": True}).data

            def forget(claim: Claim) -> Any:
                entry_forget(pool_id=pool_id, reader=reader, entry_id=command["id"], claim=claim)
                return forgotten

            return idempotent(
                request, caller=caller, status=200, work=forget, replay=lambda _: forgotten
            )
        if kind is ForgetMineCommand:

            def forget_mine(claim: Claim) -> Any:
                done = entries_forget_mine(pool_id=pool_id, reader=reader, claim=claim)
                return ForgetMineOutput(done).data

            def forgot_mine(resource: str) -> Any:
                return ForgetMineOutput(Forgotten.of_resource(resource)).data

            return idempotent(
                request, caller=caller, status=200, work=forget_mine, replay=forgot_mine
            )
        topics = check_topics(command.get("tags", []), "command.tags")

        def remember(claim: Claim) -> Any:
            entry = entry_remember(
                pool_id=pool_id,
                person_id=caller.person.id,
                organization_id=caller.organization.id,
                content=command["content"],
                topics=topics,
                said_at=command.get("saidAt"),
                claim=claim,
            )
            return EntryOutput(entry_row(entry)).data

        def remembered(entry_id: str) -> Any:
            # As GET shows it now: a purge or a Forget since reaches the replay too.
            entry = entry_for_reader(pool_id=pool_id, reader=reader, entry_id=entry_id)
            if entry is None:
                raise AnswerGone()
            return EntryOutput(entry).data

        return idempotent(request, caller=caller, status=201, work=remember, replay=remembered)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "since",
                {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
                description="Only changes after this version (default 0)",
            ),
            LIMIT,
            CURSOR,
        ],
        responses={200: MemoryLogOutput, **errors(400, 401, 404)},
    )
    @action(detail=False, methods=["get"], url_path="log")
    def log(self, request: Request, bot_id: str) -> Response:
        """[A3] Changes of entries you may see now; a page covers `limit` changes of the
        log and leaves out those with no id for you, so it may hold fewer."""
        since = query_integer(request, "since", high=MAX_VERSION) or 0
        return self._page(
            MemoryLogOutput,
            "log",
            "changes",
            lambda reader, after, limit: change_log(
                pool_id=self.bot.pool_bot_id,
                reader=reader,
                since=since if after is None else int(after),
                limit=limit,
            ),
        )

    @extend_schema(responses={200: MemoryBotOutput, **errors(401, 403, 404)})
    @action(
        detail=False,
        methods=["get"],
        url_path="bot",
        permission_classes=[IsAuthenticated, CanWriteBot],
    )
    def bot_settings(self, request: Request, bot_id: str) -> Response:
        """The memory bot's settings: write on a bot that is not linked."""
        return Response(MemoryBotOutput(pool_settings(self.bot.id)).data)

    @extend_schema(
        request=MemoryBotInput, responses={200: MemoryBotOutput, **errors(400, 401, 403, 404, 409)}
    )
    @bot_settings.mapping.patch
    def bot_settings_update(self, request: Request, bot_id: str) -> Response:
        """Change the memory bot's settings if `expected` is their version, else 409."""
        serializer = MemoryBotInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        changes: dict[str, Any] = {}
        if "instructions" in data:
            changes["instructions"] = data["instructions"]
        if "concurrency" in data:
            changes["concurrency"] = data["concurrency"]
        if "recall" in data:
            changes["recall"] = data["recall"]
        if "budget" in data:
            budget = data["budget"]
            changes["budget_period"] = budget["period"] if budget else None
            changes["budget_limit_micros"] = budget["limitMicros"] if budget else None
        pool = memory_settings_update(
            pool_id=self.bot.id, expected=data["expected"], changes=changes
        )
        return Response(MemoryBotOutput(pool).data)
