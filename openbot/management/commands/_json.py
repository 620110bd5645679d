"""Provisioning commands print exactly one JSON object on stdout, errors on stderr."""

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

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = self.run(**options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps(result))


def lookup(model: type[M], value: str, option: str) -> M:
    """The object with id `value`, or a clear error naming the option."""
    found = model._default_manager.filter(pk=value).first()
    if found is None:
        raise CommandError(f"{option}: no {model.__name__.lower()} with id {value!r}")
    return found
