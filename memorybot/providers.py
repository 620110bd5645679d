"""[B2] Model providers: a model is named `"<provider>:<model>"`.

- `openai:<model>` — any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama,
  llama.cpp …) at `OPENBOT_OPENAI_BASE_URL` with `OPENBOT_OPENAI_API_KEY`, through the
  official SDK with its own `httpx.Client` and no retries.
- `offline:<anything>` — a deterministic extractive baseline built in, so the server runs end
  to end with no model server. It is NOT a language model; see `OfflineProvider`.

Requests and results are the dataclasses below, the same for both providers. A provider
raises exactly one exception type, `ProviderError`, whose message never holds content.

Output contracts. The duties ask for these shapes, and the offline provider returns them, so a
caller parses either provider's answer the same way:

- `confide`: `content` is the reply, plain text.
- `enrichment`: `content` is JSON `{"text": str, "entries": [entry id, ...]}` — the new input
  and the ids of the entries it used (the input unchanged and `[]` when none helps).
- `learning`: `content` is JSON `{"changes": [change, ...]}`; the offline provider proposes
  only `{"kind": "add", "layer": "fact", "content": str,
  "sources": [{"chat": id, "item": "i-<n>"}], "topics": []}`.
- `answer` (a bot's own model): `content` and/or `tool_calls`.
"""

import json
import logging
import math
import re
import ssl
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any, Literal, Protocol, cast

import httpcore
import httpx
import openai
from django.conf import settings

from openbot.model_names import ModelName, ModelNameError

Role = Literal["system", "user", "assistant", "tool"]
Purpose = Literal["confide", "enrichment", "learning", "answer"]

# The SDK logs request options at DEBUG (OPENAI_LOG=debug turns it on): content must never
# reach logs [X1], so its logger never goes below INFO.
if logging.getLogger("openai").getEffectiveLevel() < logging.INFO:
    logging.getLogger("openai").setLevel(logging.INFO)


class ProviderError(Exception):
    """A model call failed. `kind` says how, in words that never hold content.

    Kinds: `timeout`, `connection`, `http_status` (with `http_status` set), `bad_output`,
    `bad_config`. `usage` is what the server confirmed for an answer that proved unusable:
    it was spent all the same [B3].
    """

    def __init__(self, kind: str, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status
        self.usage: Usage | None = None


@dataclass(frozen=True)
class Tool:
    """A function the model may call; `parameters` is a JSON schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Tool":
        return cls(
            name=data["name"], description=data["description"], parameters=data["parameters"]
        )


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for; `arguments` is the parsed JSON object."""

    id: str
    name: str
    arguments: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ToolCall":
        return cls(id=data["id"], name=data["name"], arguments=data["arguments"])


@dataclass(frozen=True)
class Message:
    """One chat message. An assistant message may carry tool calls; a tool message answers
    the call `tool_call_id`."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @classmethod
    def system(cls, text: str) -> "Message":
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> "Message":
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str | None, tool_calls: Sequence[ToolCall] = ()) -> "Message":
        return cls(role="assistant", content=text, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, text: str) -> "Message":
        return cls(role="tool", content=text, tool_call_id=tool_call_id)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["toolCalls"] = [call.to_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["toolCallId"] = self.tool_call_id
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Message":
        return cls(
            role=data["role"],
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_json(call) for call in data.get("toolCalls", ())),
            tool_call_id=data.get("toolCallId"),
        )


@dataclass(frozen=True)
class EntryText:
    """An entry a duty may use, as the model sees it: its id and its (decrypted) content."""

    id: str
    content: str


@dataclass(frozen=True)
class ItemText:
    """A chat item learning reads: `item` is its public id (`i-<n>`), `kind` its item kind."""

    chat: str
    item: str
    kind: str
    text: str


@dataclass(frozen=True)
class Material:
    """What a duty works on, in structured form.

    The messages carry the same facts as prose for a language model; the OpenAI provider
    ignores this, the offline provider works from it only. `text` is the person's input
    (enrichment) or the confession (confide)."""

    text: str = ""
    entries: tuple[EntryText, ...] = ()
    items: tuple[ItemText, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "entries": [{"id": e.id, "content": e.content} for e in self.entries],
            "items": [
                {"chat": i.chat, "item": i.item, "kind": i.kind, "text": i.text} for i in self.items
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Material":
        return cls(
            text=data.get("text", ""),
            entries=tuple(EntryText(**entry) for entry in data.get("entries", ())),
            items=tuple(ItemText(**item) for item in data.get("items", ())),
        )


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request. `json_output` asks for a JSON object answer."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    json_output: bool = False
    temperature: float | None = None
    max_output_tokens: int | None = None
    material: Material | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "messages": [message.to_json() for message in self.messages],
            "tools": [tool.to_json() for tool in self.tools],
            "jsonOutput": self.json_output,
        }
        if self.temperature is not None:
            data["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            data["maxOutputTokens"] = self.max_output_tokens
        if self.material is not None:
            data["material"] = self.material.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelRequest":
        material = data.get("material")
        return cls(
            messages=tuple(Message.from_json(message) for message in data["messages"]),
            tools=tuple(Tool.from_json(tool) for tool in data.get("tools", ())),
            json_output=bool(data.get("jsonOutput", False)),
            temperature=data.get("temperature"),
            max_output_tokens=data.get("maxOutputTokens"),
            material=Material.from_json(material) if material is not None else None,
        )


@dataclass(frozen=True)
class Usage:
    """What the provider confirmed; None where it said nothing. `cost_micros` is a cost the
    provider itself reported (micro-USD), which wins over configured prices."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_micros: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costMicros": self.cost_micros,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Usage":
        return cls(
            input_tokens=data.get("inputTokens"),
            output_tokens=data.get("outputTokens"),
            cost_micros=data.get("costMicros"),
        )


@dataclass(frozen=True)
class ModelResult:
    """The model's answer: text, tool calls, and usage (None when the provider sent none)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "toolCalls": [call.to_json() for call in self.tool_calls],
            "usage": self.usage.to_json() if self.usage is not None else None,
            "finishReason": self.finish_reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelResult":
        usage = data.get("usage")
        return cls(
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_json(call) for call in data.get("toolCalls", ())),
            usage=Usage.from_json(usage) if usage is not None else None,
            finish_reason=data.get("finishReason"),
        )


class Provider(Protocol):
    def complete(self, *, purpose: str, request: ModelRequest, timeout_s: float) -> ModelResult:
        """Answer `request` within `timeout_s` seconds or raise `ProviderError`."""
        ...


def provider_for(model: ModelName) -> Provider:
    if model.provider == "openai":
        return OpenAIProvider(model.name)
    if model.provider == "offline":
        return OfflineProvider(model.name)
    raise ModelNameError(f"unknown model provider {model.provider[:40]!r}")


# --- OpenAI-compatible chat completions -------------------------------------------------------


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
        payload = self._payload(request)
        try:
            with httpx.Client(
                transport=_DeadlineTransport(deadline_at), timeout=httpx.Timeout(timeout_s)
            ) as http_client:
                client = openai.OpenAI(
                    base_url=settings.OPENBOT_OPENAI_BASE_URL,
                    # Local servers (Ollama, llama.cpp) need no key, but the SDK wants one.
                    api_key=settings.OPENBOT_OPENAI_API_KEY or "unset",
                    # The SDK is typed for its own httpx fork; it accepts an httpx.Client too.
                    http_client=cast(Any, http_client),
                    max_retries=0,
                    timeout=timeout_s,
                )
                raw = client.chat.completions.with_raw_response.create(**payload)
                body = raw.http_response.content
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

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
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
        if request.json_output:
            payload["response_format"] = {"type": "json_object"}
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            payload["max_tokens"] = request.max_output_tokens
        return payload


@cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one loads the CA bundle (~20 ms)."""
    return httpx.create_ssl_context()


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every step ends by `deadline_at` (a `time.monotonic()` value).

    httpx's timeouts count per step, so a read that gets one byte a second never times out;
    here each step waits at most for the time left, and none starts after the deadline."""

    WRITE_CHUNK = 64 * 1024

    def __init__(self, stream: httpcore.NetworkStream, deadline_at: float) -> None:
        self._stream = stream
        self._deadline_at = deadline_at

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(self._deadline_at, timeout, "read"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), self.WRITE_CHUNK):
            chunk = buffer[start : start + self.WRITE_CHUNK]
            self._stream.write(chunk, _time_left(self._deadline_at, timeout, "write"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._stream.start_tls(ssl_context, server_hostname, left)
        return _DeadlineStream(stream, self._deadline_at)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each wrapped in a `_DeadlineStream`."""

    def __init__(self, deadline_at: float) -> None:
        self._backend = httpcore.SyncBackend()
        self._deadline_at = deadline_at

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline_at)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(self._deadline_at, timeout, "connect")
        stream = self._backend.connect_unix_socket(path, left, socket_options)
        return _DeadlineStream(stream, self._deadline_at)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


_STEP_TIMEOUTS: dict[str, type[httpcore.TimeoutException]] = {
    "connect": httpcore.ConnectTimeout,
    "read": httpcore.ReadTimeout,
    "write": httpcore.WriteTimeout,
}


def _time_left(deadline_at: float, timeout: float | None, step: str) -> float:
    """How long the next network `step` may wait: the step's own timeout, never past the
    deadline; past it, the step's timeout error (httpx maps it, the SDK reports a timeout)."""
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise _STEP_TIMEOUTS[step]("the model call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose sockets keep the call's deadline."""

    def __init__(self, deadline_at: float) -> None:
        super().__init__(verify=_ssl_context())
        # httpx takes no network backend; its pool (what `handle_request` uses) does.
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(), network_backend=_DeadlineBackend(deadline_at)
        )


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


_JSON = json.JSONDecoder()
_JSON_STARTS = 64


def first_json_object(text: str | None) -> dict[str, Any] | None:
    """The first complete JSON object in a model's text answer, or None.

    Real servers and small models wrap the object the duty asked for: in prose ("Here is the
    JSON: {...}"), in a Markdown code fence, or followed by more text or blank lines until
    `max_tokens` cut the answer off. Each `{` is tried in turn until one starts an object
    that decodes whole. An object cut off mid-way never decodes, though one nested in it may:
    what the object holds is always the caller's to check."""
    if not text:
        return None
    start = text.find("{")
    # A bound on the attempts, so an answer full of braces costs no quadratic scan.
    for _attempt in range(_JSON_STARTS):
        if start == -1:
            return None
        try:
            value, _end = _JSON.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


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


# --- The offline extractive baseline --------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A short list reads best as words in a block.
_STOPWORDS = frozenset(
    """
    the and for are but not you your yours with this that these those have has had was were
    will would can could should shall may might must from into onto about what when where who
    whom which why how all any some our ours their theirs them they she her his him its it's
    there here been being than then too very just also only over under again more most
    please thanks thank hello dear
    und oder aber der die das den dem des ein eine einer eines einem einen ich du sie wir ihr
    ist sind war nicht mit für auf aus bei von zu zum zur im in an als auch noch wie was wer
    bitte danke hallo
    """.split()  # noqa: SIM905
)
_GIST_CHARS = 160
_ANSWER_CHARS = 500


def _words(text: str) -> set[str]:
    return {
        word for word in _WORD.findall(text.casefold()) if len(word) >= 3 and word not in _STOPWORDS
    }


def _squash(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _gist(text: str) -> str:
    """The first sentence of `text`, whitespace tidied and clipped."""
    squashed = _squash(text)
    return _clip(_SENTENCE_END.split(squashed, maxsplit=1)[0], _GIST_CHARS) if squashed else ""


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content or ""
    return ""


class OfflineProvider:
    """A deterministic extractive baseline — NOT a language model.

    It understands nothing: it copies, matches shared words and fills fixed templates, so the
    server runs end to end with no model server and tests get the same answer every time.
    For each duty (the call's purpose), from `request.material` when given, else the last
    user message:

    - `confide`: a fixed-shape reply in the manner of a priest hearing a confession — quotes
      the first sentence, does not judge, calls a mistake part of the work, asks the bot to
      tell the person openly and repair what it can; no new tasks.
    - `enrichment`: the input verbatim, followed by the content of each given entry that
      shares a word (three letters or more, not a common stop word) with it, in the order
      given; returns those entry ids. No shared word → the input unchanged and no ids.
    - `learning`: one `add` fact per person item, its text (whitespace tidied) sourced from
      that item; other items (bot messages, tool results, notices) give nothing.
    - `answer` (as a bot's own model): if a `confide` tool is offered and not yet called since
      the last user message, calls it once; otherwise answers briefly by quoting the input.

    Usage: zero tokens and a confirmed cost of 0 — no model runs, so nothing is spent, and a
    budget counts the call as free.
    """

    def __init__(self, model: str) -> None:
        self.model = model

    def complete(self, *, purpose: str, request: ModelRequest, timeout_s: float) -> ModelResult:
        material = request.material or Material(text=_last_user_text(request))
        if purpose == "confide":
            return self._result(self.confide_reply(material.text))
        if purpose == "enrichment":
            text, used = self.enrich(material.text, material.entries)
            return self._result(json.dumps({"text": text, "entries": used}, ensure_ascii=False))
        if purpose == "learning":
            changes = self.facts(material.items)
            return self._result(json.dumps({"changes": changes}, ensure_ascii=False))
        if purpose == "answer":
            return self.answer(request)
        raise ProviderError("bad_config", f"the offline model has no duty {purpose[:40]!r}")

    @staticmethod
    def _result(content: str, tool_calls: tuple[ToolCall, ...] = ()) -> ModelResult:
        return ModelResult(
            content=content,
            tool_calls=tool_calls,
            usage=Usage(input_tokens=0, output_tokens=0, cost_micros=0),
            finish_reason="tool_calls" if tool_calls else "stop",
        )

    @staticmethod
    def confide_reply(confession: str) -> str:
        gist = _gist(confession)
        heard = f"I hear you: “{gist}” " if gist else ""
        return (
            f"Thank you for telling me. {heard}I do not judge you for it. "
            "A mistake is part of the work. Tell the person openly what happened, "
            "and repair what you can."
        )

    @staticmethod
    def enrich(text: str, entries: Sequence[EntryText]) -> tuple[str, list[str]]:
        words = _words(text)
        used = [entry for entry in entries if words & _words(entry.content)]
        if not used:
            return text, []
        added = "\n".join(_squash(entry.content) for entry in used)
        return f"{text}\n\n{added}", [entry.id for entry in used]

    @staticmethod
    def facts(items: Sequence[ItemText]) -> list[dict[str, Any]]:
        return [
            {
                "kind": "add",
                "layer": "fact",
                "content": _squash(item.text),
                "sources": [{"chat": item.chat, "item": item.item}],
                "topics": [],
            }
            for item in items
            if item.kind == "person" and item.text.strip()
        ]

    def answer(self, request: ModelRequest) -> ModelResult:
        text = _last_user_text(request)
        confide = next((tool for tool in request.tools if tool.name == "confide"), None)
        if confide is not None and not _confided_since_last_user(request):
            arguments = _fill_text_arguments(
                confide.parameters, f"I am not sure I got this right: {_gist(text)}"
            )
            call = ToolCall(
                id=f"call_offline_{len(request.messages)}", name="confide", arguments=arguments
            )
            return self._result("", (call,))
        quoted = _clip(_squash(text), _ANSWER_CHARS)
        return self._result(f"I read your message: “{quoted}”" if quoted else "I am here.")


def _confided_since_last_user(request: ModelRequest) -> bool:
    for message in reversed(request.messages):
        if message.role == "user":
            return False
        if any(call.name == "confide" for call in message.tool_calls):
            return True
    return False


def _fill_text_arguments(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for a tool schema: `text` in every required string property (or, when none
    is required, in every string property)."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        return {}
    strings = [
        name
        for name, spec in properties.items()
        if isinstance(spec, dict) and spec.get("type") == "string"
    ]
    required = [name for name in schema.get("required") or [] if name in strings]
    return {name: text for name in (required or strings)}
