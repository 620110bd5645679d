"""[B2] `offline:<anything>`: a deterministic extractive baseline built in, so the server runs
end to end with no model server. It is NOT a language model; see `OfflineProvider`."""

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memorybot.providers.statements import learned_changes
from memorybot.providers.types import (
    EntryText,
    Material,
    ModelRequest,
    ModelResult,
    ProviderError,
    ToolCall,
    Usage,
)
from memorybot.quoting import quoted, quoted_block

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
      given, as quoted notes (`memorybot.quoting`), each with the day it was said when known;
      returns those entry ids. No shared word → the input unchanged and no ids.
    - `learning`: one `add` fact per statement a person makes, and an `invalidate` for a
      shown entry a statement corrects; never a question, greeting, thanks, small talk,
      hypothetical, request or instruction — see `memorybot.providers.statements`.
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
            changes = learned_changes(material.items, material.entries)
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
        notes = quoted_block(
            "notes",
            [
                f"- {quoted(_squash(entry.content))}"
                + (f" (said {entry.said})" if entry.said else "")
                for entry in used
            ],
        )
        return f"{text}\n\n{notes}", [entry.id for entry in used]

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
