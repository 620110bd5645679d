"""Memory routes [A1–A3, A5]: thin views over memory.selectors and memory.services. The
purge route [A4] lives in `memorybot.apis`: it also removes the memory bot's copies [P4]."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.access import Reader
from memory.models import Pool
from memory.selectors import change_log, entries_for_reader, entry_body, pool_settings
from memory.services import (
    check_topics,
    entry_forget,
    entry_remember,
    memory_settings_update,
)
from openbot.access import Caller, bot_for_memory_admin, bot_for_reader
from openbot.auth import caller_of
from openbot.errors import invalid
from openbot.models import Bot
from openbot.schema import ERRORS
from openbot.serializers import StrictCharField, StrictSerializer


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer; refuses strings ("2") and floats (2.0) that DRF would coerce."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


ENTRY = inline_serializer(
    name="Entry",
    fields={
        "id": serializers.CharField(),
        "layer": serializers.ChoiceField(["fact", "observation", "pinned"]),
        "content": serializers.CharField(),
        "tags": serializers.ListField(child=serializers.CharField()),
        "sources": serializers.ListField(child=serializers.DictField()),
        "status": serializers.ChoiceField(["active", "invalidated", "retracted"]),
        "createdAt": serializers.IntegerField(),
        "updatedAt": serializers.IntegerField(),
        "invalidatedAt": serializers.IntegerField(required=False),
        "confidence": serializers.FloatField(required=False),
    },
)


def reader_of(caller: Caller, bot: Bot) -> Reader:
    # [L1] Not `Reader.person`: every selector and service reads the reader's rights again
    # under the pool's lock (`as_of_now`), so rights read here would only be read twice.
    return Reader(organization_id=caller.organization.id, person_id=caller.person.id, bot=bot)


class MemoryApi(APIView):
    class CommandSerializer(StrictSerializer):
        _tag = serializers.ChoiceField(["Remember", "Forget"])
        content = StrictCharField(required=False, max_length=10_000)
        tags = serializers.ListField(
            child=StrictCharField(max_length=64), required=False, max_length=32
        )
        id = StrictCharField(required=False, max_length=40)

    class InputSerializer(StrictSerializer):
        command = serializers.DictField()

    @extend_schema(
        parameters=[OpenApiParameter("tags", str, description="Comma-separated; all must match")],
        responses={
            200: inline_serializer(
                name="MemoryList",
                fields={
                    "entries": serializers.ListField(child=ENTRY),
                    "version": serializers.IntegerField(),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, bot_id: str) -> Response:
        caller = caller_of(request)
        bot = bot_for_reader(caller=caller, bot_id=bot_id)
        raw_tags = request.query_params.get("tags", "")
        tags = [tag.strip() for tag in raw_tags.split(",") if tag.strip()]
        if len(tags) > 32 or any(len(tag) > 200 for tag in tags):
            raise invalid("tags", "at most 32 tags of at most 200 characters")
        entries, version = entries_for_reader(
            pool_id=bot.pool_bot_id, reader=reader_of(caller, bot), tags=tags
        )
        return Response({"entries": entries, "version": version})

    @extend_schema(
        request=inline_serializer(
            name="MemoryCommand",
            fields={
                "command": inline_serializer(
                    name="MemoryCommandBody",
                    fields={
                        "_tag": serializers.ChoiceField(["Remember", "Forget"]),
                        "content": serializers.CharField(required=False),
                        "tags": serializers.ListField(
                            child=serializers.CharField(), required=False
                        ),
                        "id": serializers.CharField(required=False),
                    },
                )
            },
        ),
        responses={
            201: ENTRY,
            200: inline_serializer(name="Forgotten", fields={"ok": serializers.BooleanField()}),
            **ERRORS,
        },
    )
    def post(self, request: Request, bot_id: str) -> Response:
        caller = caller_of(request)
        bot = bot_for_reader(caller=caller, bot_id=bot_id)
        outer = self.InputSerializer(data=request.data)
        outer.is_valid(raise_exception=True)
        command_input = self.CommandSerializer(data=outer.validated_data["command"])
        if not command_input.is_valid():
            raise serializers.ValidationError({"command": command_input.errors})
        command: dict[str, Any] = command_input.validated_data
        if command["_tag"] == "Remember":
            if "content" not in command:
                raise invalid("command.content", "this field is required for Remember")
            if "id" in command:
                raise invalid("command.id", "Remember takes content and optional tags, no id")
            entry = entry_remember(
                pool_id=bot.pool_bot_id,
                person_id=caller.person.id,
                organization_id=caller.organization.id,
                content=command["content"],
                topics=check_topics(command.get("tags", []), "command.tags"),
            )
            return Response(entry_body(entry), status=201)
        if "id" not in command:
            raise invalid("command.id", "this field is required for Forget")
        for extra in ("content", "tags"):
            if extra in command:
                raise invalid(f"command.{extra}", "Forget takes an id only")
        entry_forget(pool_id=bot.pool_bot_id, reader=reader_of(caller, bot), entry_id=command["id"])
        return Response({"ok": True})


class MemoryLogApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("since", int, description="Only changes after this version")],
        responses={
            200: inline_serializer(
                name="MemoryLog",
                fields={
                    "changes": serializers.ListField(child=serializers.DictField()),
                    "version": serializers.IntegerField(),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, bot_id: str) -> Response:
        caller = caller_of(request)
        bot = bot_for_reader(caller=caller, bot_id=bot_id)
        raw = request.query_params.get("since", "0")
        # isascii: str.isdigit() also accepts digits such as "²" that int() refuses.
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
            raise invalid("since", "must be a non-negative integer version")
        changes, version = change_log(
            pool_id=bot.pool_bot_id, reader=reader_of(caller, bot), since=int(raw)
        )
        return Response({"changes": changes, "version": version})


class BudgetSerializer(StrictSerializer):
    period = serializers.ChoiceField(["day", "month"])
    limitMicros = StrictIntegerField(min_value=0, max_value=10**15)


class MemoryBotOutput(serializers.Serializer):
    version = serializers.IntegerField(source="settings_version")
    instructions = serializers.CharField()
    concurrency = serializers.IntegerField(allow_null=True)
    budget = serializers.SerializerMethodField()

    def get_budget(self, pool: Pool) -> dict[str, Any] | None:
        if pool.budget_period is None:
            return None
        return {"period": pool.budget_period, "limitMicros": pool.budget_limit_micros}


class MemoryBotApi(APIView):
    class InputSerializer(StrictSerializer):
        expected = StrictIntegerField(min_value=0, max_value=2**31 - 1)
        instructions = StrictCharField(required=False, allow_blank=True, max_length=10_000)
        concurrency = StrictIntegerField(
            required=False, allow_null=True, min_value=1, max_value=1000
        )
        budget = BudgetSerializer(required=False, allow_null=True)

    @extend_schema(responses={200: MemoryBotOutput, **ERRORS})
    def get(self, request: Request, bot_id: str) -> Response:
        bot = bot_for_memory_admin(caller=caller_of(request), bot_id=bot_id)
        return Response(MemoryBotOutput(pool_settings(bot.id)).data)

    @extend_schema(request=InputSerializer, responses={200: MemoryBotOutput, **ERRORS})
    def patch(self, request: Request, bot_id: str) -> Response:
        bot = bot_for_memory_admin(caller=caller_of(request), bot_id=bot_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        changes: dict[str, Any] = {}
        if "instructions" in data:
            changes["instructions"] = data["instructions"]
        if "concurrency" in data:
            changes["concurrency"] = data["concurrency"]
        if "budget" in data:
            budget = data["budget"]
            changes["budget_period"] = budget["period"] if budget else None
            changes["budget_limit_micros"] = budget["limitMicros"] if budget else None
        pool = memory_settings_update(pool_id=bot.id, expected=data["expected"], changes=changes)
        return Response(MemoryBotOutput(pool).data)
