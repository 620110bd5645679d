"""`openai:<model>`: any OpenAI-compatible chat-completions server (OpenAI, vLLM,
Ollama, llama.cpp …) at `OPENBOT_OPENAI_BASE_URL` with `OPENBOT_OPENAI_API_KEY`, through the
official SDK with its own `httpx.Client` and no retries."""

import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, cast

import httpx
import openai
from django.conf import settings

from memorybot.providers.deadline import DeadlineTransport
from memorybot.providers.types import (
    AnswerSchema,
    Message,
    ModelRequest,
    ModelResult,
    ProviderError,
    ToolCall,
    Usage,
)

# The SDK logs request options at DEBUG (OPENAI_LOG=debug turns it on): content must never
# reach logs, so its logger never goes below INFO.
if logging.getLogger("openai").getEffectiveLevel() < logging.INFO:
    logging.getLogger("openai").setLevel(logging.INFO)

logger = logging.getLogger(__name__)


# [K2] How a request with an answer schema asks for its shape, most precise first. OpenAI, vLLM,
# Ollama and llama.cpp's own server take `json_schema`; llama-cpp-python's server takes the
# schema inside `json_object`; then any JSON object; then prose, which the duties' parsers read
# too (`first_json_object`).
JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT, PROSE = (
    "json_schema",
    "json_object+schema",
    "json_object",
    "prose",
)
ANSWER_FORMS = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT, PROSE)
# What a server says when it refuses a `response_format`: an HTTP 400 or 422 (llama.cpp, vLLM,
# OpenAI), or a 500 (llama-cpp-python's server) whose body names the form.
_REFUSAL_STATUSES = frozenset({400, 422, 500})
_REFUSAL_MARKERS = ("response_format", "json_schema", "json schema", "grammar")


class RefusedForms:
    """The answer forms each server (by base URL) has refused, for this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[str, set[str]] = {}

    def refused(self, base_url: str, form: str) -> bool:
        with self._lock:
            return form in self._refused.get(base_url, ())

    def remember(self, base_url: str, form: str) -> None:
        with self._lock:
            self._refused.setdefault(base_url, set()).add(form)

    def forget(self) -> None:
        """Ask every server the most precise form again: another server may now answer at
        the same address (an upgraded one, or a test's)."""
        with self._lock:
            self._refused.clear()


REFUSED_FORMS = RefusedForms()


def _response_format(answer: AnswerSchema, form: str) -> dict[str, Any]:
    """The `response_format` of a request for `answer` in `form` (never the prose form)."""
    if form == JSON_SCHEMA:
        schema = {"name": answer.name, "strict": True, "schema": dict(answer.schema)}
        return {"type": "json_schema", "json_schema": schema}
    if form == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": dict(answer.schema)}
    return {"type": "json_object"}


def _refuses_answer_form(exc: openai.APIStatusError) -> bool:
    """Whether the server's error refuses the request's `response_format` (rather than, say,
    its length). Its body is only looked at here, never passed on."""
    if exc.status_code not in _REFUSAL_STATUSES:
        return False
    try:
        said = exc.response.text.casefold()
    except (httpx.HTTPError, UnicodeDecodeError):
        return False
    return any(marker in said for marker in _REFUSAL_MARKERS)


class OpenAIProvider:
    """Chat completions on an OpenAI-compatible server, one HTTP request per call.

    `timeout_s` is wall-clock [C6]: every network step (connect, TLS, each write and read)
    waits at most until the call's deadline, so a server that trickles its answer byte by byte
    is cut off there like one that never answers. Proxies from the environment are not used:
    the connection is ours, so the deadline holds for all of it.
    """

    def __init__(self, model: str) -> None:
        self.model = model

    def complete(self, *, purpose: str, request: ModelRequest, timeout_s: float) -> ModelResult:
        if timeout_s <= 0:
            raise ProviderError("timeout", "no time left for the model call")
        deadline_at = time.monotonic() + timeout_s
        base_url = settings.OPENBOT_OPENAI_BASE_URL
        try:
            with httpx.Client(
                transport=DeadlineTransport(deadline_at), timeout=httpx.Timeout(timeout_s)
            ) as http_client:
                client = openai.OpenAI(
                    base_url=base_url,
                    # Local servers (Ollama, llama.cpp) need no key, but the SDK wants one.
                    api_key=settings.OPENBOT_OPENAI_API_KEY or "unset",
                    # The SDK is typed for its own httpx fork; it accepts an httpx.Client too.
                    http_client=cast(Any, http_client),
                    max_retries=0,
                    timeout=timeout_s,
                )
                body = self._ask(client, request, base_url or "")
        except ProviderError:
            raise
        # Exception messages and causes may quote the server's body: never pass them on.
        except openai.APITimeoutError:
            raise ProviderError("timeout", "the model server did not answer in time") from None
        except openai.APIStatusError as exc:
            raise ProviderError(
                "http_status",
                f"the model server answered HTTP {exc.status_code}",
                http_status=exc.status_code,
            ) from None
        except openai.APIConnectionError:
            raise ProviderError("connection", "the model server could not be reached") from None
        except httpx.TimeoutException:
            raise ProviderError("timeout", "the model server did not answer in time") from None
        except (openai.OpenAIError, httpx.HTTPError, OSError):
            raise ProviderError("connection", "the model call failed") from None
        return parse_completion(body, offered=[tool.name for tool in request.tools])

    def _ask(self, client: openai.OpenAI, request: ModelRequest, base_url: str) -> bytes:
        """The server's answer to `request`, asked in the most precise answer form the server
        at `base_url` has not refused. A form it refuses is remembered, and the same call
        asks again in the next form; prose, the last, is never refused."""
        if request.answer_schema is None:
            *tried, last = (PROSE,)
        else:
            *tried, last = [
                form for form in ANSWER_FORMS if not REFUSED_FORMS.refused(base_url, form)
            ]
        for form in tried:
            try:
                return self._send(client, request, form)
            except openai.APIStatusError as exc:
                if not _refuses_answer_form(exc):
                    raise
            REFUSED_FORMS.remember(base_url, form)
            logger.info("the model server refused response_format %s: not asked again", form)
        return self._send(client, request, last)

    def _send(self, client: openai.OpenAI, request: ModelRequest, form: str) -> bytes:
        raw = client.chat.completions.with_raw_response.create(**self._payload(request, form))
        return raw.http_response.content

    def _payload(self, request: ModelRequest, form: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(message) for message in request.messages],
        }
        if request.tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        if request.answer_schema is not None and form != PROSE:
            payload["response_format"] = _response_format(request.answer_schema, form)
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            payload["max_tokens"] = request.max_output_tokens
        return payload


def _wire_message(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    return data


def _bad_output(what: str) -> ProviderError:
    return ProviderError("bad_output", f"the model server's answer is unusable: {what}")


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _reported_cost_micros(value: Any) -> int | None:
    """A provider-reported cost in USD (e.g. OpenRouter's `usage.cost`) as micro-USD, rounded
    up; anything that is not a non-negative number counts as not reported."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        usd = Decimal(str(value))
    except InvalidOperation:
        return None
    if not usd.is_finite() or usd < 0:
        return None
    return math.ceil(usd * 1_000_000)


def parse_usage(data: Any) -> Usage | None:
    """Usage as the server confirmed it; None when it confirmed nothing usable.

    Some servers leave out one of the two counts but send `total_tokens`; the missing count
    is then what the server confirmed, total minus the other. A total smaller than the count
    it should contain confirms nothing."""
    if not isinstance(data, dict):
        return None
    input_tokens = _count(data.get("prompt_tokens"))
    output_tokens = _count(data.get("completion_tokens"))
    total = _count(data.get("total_tokens"))
    if total is not None:
        if input_tokens is None and output_tokens is not None and total >= output_tokens:
            input_tokens = total - output_tokens
        elif output_tokens is None and input_tokens is not None and total >= input_tokens:
            output_tokens = total - input_tokens
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_micros=_reported_cost_micros(data.get("cost")),
    )
    if usage == Usage():
        return None
    return usage


def parse_completion(body: bytes | str, *, offered: Sequence[str] = ()) -> ModelResult:
    """Read a chat-completions response body; anything malformed is `bad_output`.

    What real servers add is tolerated [B8]: extra fields (llama.cpp sends the legacy
    `function_call` beside `tool_calls`; it is ignored), a tool call without an id (it gets
    one), and a name that is an `offered` tool's in the model's own spelling ("confide:",
    "functions.confide"). A call whose arguments the server cut off at `max_tokens`
    (`finish_reason: "length"`) is dropped; an answer left with neither text nor a call is
    `bad_output`."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _bad_output("not JSON") from None
    if not isinstance(data, dict):
        raise _bad_output("not a JSON object")
    usage = parse_usage(data.get("usage"))
    try:
        return _completion(data, usage, offered)
    except ProviderError as exc:
        exc.usage = usage
        raise


def _completion(data: dict[str, Any], usage: Usage | None, offered: Sequence[str]) -> ModelResult:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _bad_output("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise _bad_output("no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _bad_output("content is not text")
    finish_reason = choices[0].get("finish_reason")
    cut = finish_reason == "length"
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _bad_output("tool_calls is not a list")
    tool_calls = []
    for index, raw_call in enumerate(raw_calls):
        call = _tool_call(raw_call, index, offered)
        if call is None and not cut:
            raise _bad_output("tool call arguments are not a JSON object")
        if call is not None:
            tool_calls.append(call)
    if raw_calls and not tool_calls and not (content or "").strip():
        raise _bad_output("the answer was cut off inside its tool calls")
    return ModelResult(
        content=content,
        tool_calls=tuple(tool_calls),
        usage=usage,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _tool_call(raw_call: Any, index: int, offered: Sequence[str]) -> ToolCall | None:
    """One tool call; None when its arguments are not a JSON object (say, cut off)."""
    function = raw_call.get("function") if isinstance(raw_call, dict) else None
    if not isinstance(function, dict):
        raise _bad_output("a tool call has no function")
    call_id, name, arguments = raw_call.get("id"), function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not name.strip():
        raise _bad_output("a tool call has no name")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{index}"
    if arguments in (None, ""):
        parsed: Any = {}
    elif isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return None
    else:
        parsed = arguments
    if not isinstance(parsed, dict):
        return None
    return ToolCall(id=call_id, name=_tool_name(name, offered), arguments=parsed)


def _tool_name(name: str, offered: Sequence[str]) -> str:
    """An offered tool's name for `name` in a model's own spelling, else `name` unchanged
    (the caller answers that no such tool exists)."""
    if name in offered:
        return name
    tidied = name.strip().strip("`'\"").removeprefix("functions.").rstrip(":").strip()
    return tidied if tidied in offered else name
