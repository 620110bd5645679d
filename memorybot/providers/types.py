"""The wire types of a model call, the same for every provider: requests, results,
usage, and the one exception a provider raises (`ProviderError`, whose message never holds
content)."""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


class ProviderError(Exception):
    """A model call failed. `kind` says how, in words that never hold content.

    Kinds: `timeout`, `connection`, `http_status` (with `http_status` set), `bad_output`,
    `bad_config`. `usage` is what the server confirmed for an answer that proved unusable:
    it was spent all the same.
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
    """An entry a duty may use, as the model sees it: its id, its (decrypted) content and the
    day it was said; for learning, also its people (the ids of its `from:` tags)."""

    id: str
    content: str
    people: tuple[str, ...] = ()
    said: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "content": self.content}
        if self.said:
            data["said"] = self.said
        if self.people:
            data["people"] = list(self.people)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EntryText":
        return cls(id=data["id"], content=data["content"], people=tuple(data.get("people", ())))


@dataclass(frozen=True)
class ItemText:
    """A chat item learning reads: `item` is its public id (`i-<n>`), `kind` its item kind,
    `person` the person of its turn (None when no person's turn holds it)."""

    chat: str
    item: str
    kind: str
    text: str
    person: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "chat": self.chat,
            "item": self.item,
            "kind": self.kind,
            "text": self.text,
        }
        if self.person is not None:
            data["person"] = self.person
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ItemText":
        return cls(
            chat=data["chat"],
            item=data["item"],
            kind=data["kind"],
            text=data["text"],
            person=data.get("person"),
        )


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
            "entries": [entry.to_json() for entry in self.entries],
            "items": [item.to_json() for item in self.items],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Material":
        return cls(
            text=data.get("text", ""),
            entries=tuple(EntryText.from_json(entry) for entry in data.get("entries", ())),
            items=tuple(ItemText.from_json(item) for item in data.get("items", ())),
        )


@dataclass(frozen=True)
class AnswerSchema:
    """The JSON answers a duty accepts, as a strict JSON Schema (`name` names it to the
    server). Servers that can constrain their decoding to it answer only in that shape."""

    name: str
    schema: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "schema": self.schema}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AnswerSchema":
        return cls(name=data["name"], schema=data["schema"])


def strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict JSON Schema's object: every property required, no other."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def one_of(*values: str) -> dict[str, Any]:
    """A JSON Schema string that is one of `values`."""
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request. `answer_schema` asks for a JSON object of that shape."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    answer_schema: AnswerSchema | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    material: Material | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "messages": [message.to_json() for message in self.messages],
            "tools": [tool.to_json() for tool in self.tools],
        }
        if self.answer_schema is not None:
            data["answerSchema"] = self.answer_schema.to_json()
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
        schema = data.get("answerSchema")
        return cls(
            messages=tuple(Message.from_json(message) for message in data["messages"]),
            tools=tuple(Tool.from_json(tool) for tool in data.get("tools", ())),
            answer_schema=AnswerSchema.from_json(schema) if schema is not None else None,
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


# Control characters inside strings are read as written: the JSON grammars of llama.cpp's
# servers let a model write a line break raw.
_JSON = json.JSONDecoder(strict=False)
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
