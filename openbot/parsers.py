"""The one request parser: JSON, bounded so that no body makes a route answer 500 [§8]."""

import io
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with two limits it lacks.

    DRF streams the body into `json.load`, so Django's `DATA_UPLOAD_MAX_MEMORY_SIZE` is not
    applied to it: a larger body is a 413 here. A body nested deeper than Python's recursion
    limit (`[[[[…` is only two bytes a level) raises `RecursionError`, which DRF does not
    catch: it is a 400 here.
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestDataTooBig("the request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE")
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
