"""[A15] Model names: `"<provider>:<model>"` with a provider OpenBot knows.

Checked where a model is set (`botMemoryModel`, a bot's model, the commands), so a typo is a
400 naming the field rather than a run that fails later; the memory bot parses the same way.
"""

from dataclasses import dataclass

from openbot.errors import invalid

PROVIDERS = ("openai", "offline")
MAX_MODEL_NAME = 200
# What `parse_model` accepts, for the schema: a known provider, a colon, a name that is
# not blank (both are stripped of surrounding whitespace), and no NUL anywhere.
MODEL_NAME_PATTERN = rf"^\s*({'|'.join(PROVIDERS)})\s*:[^\x00]*[^\s\x00][^\x00]*$"


class ModelNameError(ValueError):
    """A model string that is not `"<provider>:<model>"` with a known provider."""


@dataclass(frozen=True)
class ModelName:
    provider: str
    name: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"


def parse_model(value: str) -> ModelName:
    """Split `"<provider>:<model>"`; the model part may itself hold colons (`llama3:8b`)."""
    if not isinstance(value, str) or ":" not in value:
        raise ModelNameError('a model is written "<provider>:<model>", e.g. "openai:gpt-4o-mini"')
    provider, name = value.split(":", 1)
    provider, name = provider.strip(), name.strip()
    if provider not in PROVIDERS:
        raise ModelNameError(
            f"unknown model provider {provider[:40]!r}; known: {', '.join(PROVIDERS)}"
        )
    if not name:
        raise ModelNameError(f'the model name after "{provider}:" is empty')
    if len(value) > MAX_MODEL_NAME:
        raise ModelNameError(f"a model name has at most {MAX_MODEL_NAME} characters")
    return ModelName(provider=provider, name=name)


def model_name_checked(value: str, *, field: str) -> str:
    """`value` as it will be stored, or a 400 naming `field`."""
    try:
        return str(parse_model(value))
    except ModelNameError as exc:
        raise invalid(field, str(exc)) from None
