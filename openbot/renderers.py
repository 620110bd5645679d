"""The one response renderer: DRF's JSON, encoded by orjson.

orjson encodes a large listing's body far faster than `json.dumps`, which was a visible share
of the listing's time.
The body is the one DRF's `JSONRenderer` writes — compact, UTF-8, U+2028 and U+2029 escaped so
that it stays a strict JavaScript subset — byte for byte for strings, integers, booleans,
nulls, lists and objects. Floats are the same numbers, though orjson writes some of them
otherwise (1e-05 as 0.00001); where DRF would fail on a value (NaN, an infinity, a key it
cannot encode), orjson writes null or the key as text. Whatever orjson does not encode itself
(times, decimals, lazy strings …) goes through DRF's own encoder, and what orjson refuses (an
integer beyond 64 bits) is rendered by DRF as before. A client that asks for an indented body
(`Accept: application/json; indent=4`) gets DRF's own rendering.
"""

from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

_DRF = JSONEncoder()
# Times and dataclasses as DRF encodes them, not as orjson would; int keys become strings.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_OPTIONS |= orjson.OPT_NON_STR_KEYS


def json_bytes(data: Any) -> bytes:
    """`data` as the body DRF's `JSONRenderer` writes for it, without indent."""
    body = orjson.dumps(data, default=_DRF.default, option=_OPTIONS)
    return body.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer, encoding with orjson unless an indent is asked for."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None or self.get_indent(accepted_media_type or "", renderer_context or {}):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            return json_bytes(data)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
