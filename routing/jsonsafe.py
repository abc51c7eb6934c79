"""JSON from an upstream, made safe to use: whatever the text, parsing either returns values that can be
rendered, logged and stored, or raises ValueError (an attempt failure), never anything else.

Two things valid-looking JSON can carry that the standard parser lets through: nesting deeper than the
interpreter allows (RecursionError, which is not a ValueError) and escaped lone surrogates (`"\\ud800"`, valid
JSON but not valid Unicode: the UTF-8 encoder of the renderer and of the database driver then fail). The first
becomes a ValueError; the second is replaced by U+FFFD.

orjson parses first (C speed); what it refuses or would read differently goes to the standard parser, whose
behaviour is the rule: text that is not UTF-8, NaN and infinite numbers, escaped lone surrogates, nesting past
orjson's 1024 levels, and integers of 19 digits or more (orjson reads those beyond 64 bits as floats; a negative
one of 19 digits can be)."""

import contextlib
import json
import re
from typing import Any

import orjson

REPLACEMENT = "\ufffd"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONG_NUMBER = re.compile(r"\d{19}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19}")


def loads(data: str | bytes | bytearray) -> Any:
    """`json.loads` for upstream text (bytes: UTF-8, UTF-16 or UTF-32; invalid UTF-8 is decoded with U+FFFD)."""
    long_number = _LONG_NUMBER.search(data) if isinstance(data, str) else _LONG_NUMBER_BYTES.search(data)
    if long_number is None:
        with contextlib.suppress(orjson.JSONDecodeError):  # refused: the standard parser says what it makes of it
            return orjson.loads(data)  # it refuses lone surrogates, so nothing is left to clean
    try:
        try:
            value = json.loads(data)
        except UnicodeDecodeError:
            assert not isinstance(data, str)  # only bytes can fail to decode
            data = bytes(data).decode("utf-8", errors="replace")
            value = json.loads(data)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
    found = _SURROGATE_ESCAPE.search(data) if isinstance(data, str) else _SURROGATE_ESCAPE_BYTES.search(data)
    if found:
        value = clean(value)
    return value


def clean_text(text: str) -> str:
    return _SURROGATE.sub(REPLACEMENT, text)


def clean(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced; iterative, so depth is no issue."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, dict | list):
        return value
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = clean_text(item)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
        elif isinstance(item, dict):
            if any(isinstance(name, str) and _SURROGATE.search(name) for name in item):
                cleaned = {clean_text(name): entry for name, entry in item.items()}
                item.clear()
                item.update(cleaned)
            stack.extend((item, name) for name in item)
    return root[0]
