"""Management commands print exactly one JSON object on stdout, errors on stderr."""

import json
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Model

from openbot.errors import ApplicationError

M = TypeVar("M", bound=Model)


class JsonCommand(BaseCommand):
    """A command whose `run` returns the one JSON object it prints."""

    def run(self, **options: Any) -> dict[str, Any]:
        raise NotImplementedError

    # A service names the field at fault (`person`); a command names its option (`--person`).
    # Commands whose options are named otherwise map them here.
    options_of_fields: dict[str, str] = {}

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = self.run(**options)
        except ApplicationError as exc:
            raise CommandError(self.option_message(exc)) from None
        self.stdout.write(json.dumps(result))

    def option_message(self, exc: ApplicationError) -> str:
        """The service's message with the field it names turned into the command's option."""
        for field in exc.fields or {}:
            option = self.options_of_fields.get(field, f"--{field.replace('_', '-')}")
            if exc.message.startswith(f"{field}: "):
                return f"{option}: {exc.message[len(field) + 2 :]}"
            return f"{option}: {exc.message}"
        return exc.message


def lookup(model: type[M], value: str, option: str) -> M:
    """The object with id `value`, or a clear error naming the option."""
    found = model._default_manager.filter(pk=value).first()
    if found is None:
        raise CommandError(f"{option}: no {model.__name__.lower()} with id {value!r}")
    return found
