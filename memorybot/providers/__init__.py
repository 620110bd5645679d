"""[B2] Model providers: a model is named `"<provider>:<model>"`.

- `openai:<model>` — any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama,
  llama.cpp …) at `OPENBOT_OPENAI_BASE_URL` with `OPENBOT_OPENAI_API_KEY`, through the
  official SDK with its own `httpx.Client` and no retries.
- `offline:<anything>` — a deterministic extractive baseline built in, so the server runs end
  to end with no model server. It is NOT a language model; see `OfflineProvider`.

Requests and results are the dataclasses of `types`, the same for both providers. A provider
raises exactly one exception type, `ProviderError`, whose message never holds content.

Output contracts. The duties ask for these shapes, and the offline provider returns them, so a
caller parses either provider's answer the same way. Enrichment and learning send theirs as a
strict JSON Schema (`ModelRequest.answer_schema`) that an OpenAI-compatible server may
constrain its decoding to:

- `confide`: `content` is the reply, plain text.
- `enrichment`: `content` is JSON `{"text": str, "entries": [entry id, ...]}` — the new input
  and the ids of the entries it used (the input unchanged and `[]` when none helps).
- `learning`: `content` is JSON `{"changes": [change, ...]}`; the offline provider proposes
  only `{"kind": "add", "layer": "fact", "content": str,
  "sources": [{"chat": id, "item": "i-<n>"}], "topics": [topic, ...]}` and
  `{"kind": "invalidate", "id": entry id}`.
- `answer` (a bot's own model): `content` and/or `tool_calls`.
"""

from memorybot.providers.offline import OfflineProvider
from memorybot.providers.openai import OpenAIProvider, parse_completion, parse_usage
from memorybot.providers.types import (
    AnswerSchema,
    EntryText,
    ItemText,
    Material,
    Message,
    ModelRequest,
    ModelResult,
    Provider,
    ProviderError,
    Tool,
    ToolCall,
    Usage,
    first_json_object,
    one_of,
    strict_object,
)
from openbot.model_names import ModelName, ModelNameError

__all__ = [
    "AnswerSchema",
    "EntryText",
    "ItemText",
    "Material",
    "Message",
    "ModelRequest",
    "ModelResult",
    "OfflineProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "Tool",
    "ToolCall",
    "Usage",
    "first_json_object",
    "one_of",
    "parse_completion",
    "parse_usage",
    "provider_for",
    "strict_object",
]


def provider_for(model: ModelName) -> Provider:
    if model.provider == "openai":
        return OpenAIProvider(model.name)
    if model.provider == "offline":
        return OfflineProvider(model.name)
    raise ModelNameError(f"unknown model provider {model.provider[:40]!r}")
