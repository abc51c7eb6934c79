"""The JSON renderer of every endpoint: DRF's JSONRenderer output, encoded by orjson.

The same JSON as DRF writes with this project's settings (compact, UTF-8, U+2028 and U+2029 escaped, datetimes,
decimals, UUIDs and lazy strings as DRF's encoder turns them), at C speed: DRF's encoder runs Python's json with a
Python `default`, about a tenth of a small request's CPU in rendering its answer. A value orjson refuses (an integer
beyond 64 bits, a string with an unpaired surrogate, a key that is not a string) and an indented rendering (an
`indent` media type parameter) go to DRF's renderer, which answers them as it always did. A number that is not
finite (not JSON: requests refuse them, gateway/parsers.py, but an upstream's answer can carry one) is written as
null, where DRF's encoder raised (a 500 for an answer already served and billed)."""

import contextlib
import json
from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME  # datetimes as DRF's encoder writes them ("Z" for UTC)
_default = JSONEncoder().default
_LINE_SEPARATOR, _PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()


def json_bytes(data: Any) -> bytes:
    """`data` as DRF renders it, compact; orjson.JSONEncodeError (a TypeError) for what orjson cannot encode."""
    rendered = orjson.dumps(data, default=_default, option=_OPTIONS)
    if _LINE_SEPARATOR in rendered or _PARAGRAPH_SEPARATOR in rendered:  # as DRF: JSON that is also JavaScript
        rendered = rendered.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
    return rendered


def json_compact(value: Any) -> bytes:
    """Plain JSON values (no DRF types) as compact JSON: orjson's UTF-8, or (what orjson refuses: an integer beyond
    64 bits, an unpaired surrogate, a key that is not a string) the standard encoder's ASCII with escapes. A number
    that is not finite is written as null (the standard encoder wrote NaN or Infinity, which are not JSON)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


class FastJSONRenderer(JSONRenderer):
    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        if data is None:
            return b""
        if self.get_indent(accepted_media_type or "", renderer_context or {}) is None:
            with contextlib.suppress(orjson.JSONEncodeError):  # refused: DRF's encoder says what it makes of it
                return json_bytes(data)
        return super().render(data, accepted_media_type, renderer_context)
