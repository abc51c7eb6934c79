"""The JSON parser of every endpoint: bounded nesting, finite numbers, no NaN/Infinity literals.

Nesting is checked on the raw bytes before anything recursive runs (json's decoder recurses per level,
and so do serializers): strings are cut out with one regular expression, every byte that is not a
bracket is deleted, and the running depth of what is left is a C-speed accumulate. Linear, and about
0.05 s per MiB in the worst case (a body made only of brackets). UTF-8 is safe to scan byte-wise: the
bytes of a multi-byte character never equal `"`, `\\` or a bracket.
"""

import codecs
import gc
import json
import math
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import IO, Any, NoReturn

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from gateway.errors import MSG_JSON_TOO_DEEP, JsonTooDeep

DEFAULT_MAX_DEPTH = 64
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_DELTA = tuple(1 if byte in b"[{" else -1 for byte in range(256))
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (0 for a scalar)."""
    if raw.count(b"[") + raw.count(b"{") <= 1:
        return 1 if b"[" in raw or b"{" in raw else 0
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_DELTA.__getitem__, brackets)), default=0)


_max_depth: int | None = None  # settings.MAX_JSON_DEPTH as last read; None: read it again


def max_json_depth() -> int:
    """settings.MAX_JSON_DEPTH, or DEFAULT_MAX_DEPTH when it is not set. Read once, not per request: reading a
    setting that is not set raises (and catches) an AttributeError each time."""
    global _max_depth
    if _max_depth is None:
        _max_depth = getattr(settings, "MAX_JSON_DEPTH", DEFAULT_MAX_DEPTH)
    return _max_depth


@receiver(setting_changed)
def _max_json_depth_changed(*, setting: str, **kwargs: Any) -> None:
    """override_settings (tests) changes it: read it again."""
    global _max_depth
    if setting == "MAX_JSON_DEPTH":
        _max_depth = None


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:32]} is out of range (numbers must be finite)")
    return value


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _check_depth(utf8: bytes, max_depth: int | None) -> None:
    limit = max_json_depth() if max_depth is None else max_depth
    if json_depth(utf8) > limit:
        raise JsonTooDeep(MSG_JSON_TOO_DEEP.format(limit=limit))


def _loads(text: str, utf8: bytes) -> Any:
    # The parser only builds acyclic containers, so cyclic GC passes during a parse are pure overhead: with
    # hundreds of thousands of small arrays or objects they cost 3-4x the parse itself.
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    finally:
        if collecting:
            gc.enable()
    if _SURROGATE_ESCAPE.search(utf8):  # rare: then check exactly, at C speed, for an unpaired one
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("unpaired surrogate escape (text must be valid Unicode)") from None
    return data


def json_loads_bounded(raw: bytes | str, *, max_depth: int | None = None) -> Any:
    """json.loads with the nesting limit, finite floats and no NaN/Infinity, for JSON that came from a
    client (a credential sent as a JSON string, say). Raises JsonTooDeep or ValueError."""
    if isinstance(raw, str):
        utf8 = raw.encode("utf-8", "surrogatepass")
        _check_depth(utf8, max_depth)
        return _loads(raw, utf8)
    _check_depth(raw, max_depth)
    return _loads(raw.decode("utf-8"), raw)


class StrictJSONParser(JSONParser):
    def parse(
        self, stream: IO[Any] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
            utf8 = raw if codecs.lookup(encoding).name == "utf-8" else text.encode("utf-8", "surrogatepass")
            _check_depth(utf8, None)
            return _loads(text, utf8)
        except (ValueError, LookupError, RecursionError) as exc:
            if isinstance(exc, JsonTooDeep):
                raise
            raise ParseError(f"JSON parse error - {exc}") from None
