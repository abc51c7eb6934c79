"""Issue 11: the JSON parser reads its nesting limit (settings.MAX_JSON_DEPTH, default 64) once, not per request;
a changed setting (override_settings) is still the limit at once, and the default comes back after it."""

import io

import pytest
from django.test import override_settings
from rest_framework.exceptions import ParseError

from gateway.errors import JsonTooDeep
from gateway.parsers import DEFAULT_MAX_DEPTH, StrictJSONParser, max_json_depth


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def parse(raw: bytes):
    return StrictJSONParser().parse(io.BytesIO(raw), "application/json", {"encoding": "utf-8"})


def test_the_default_limit_without_the_setting():
    assert max_json_depth() == DEFAULT_MAX_DEPTH
    assert parse(nested(DEFAULT_MAX_DEPTH)) is not None
    with pytest.raises(JsonTooDeep):
        parse(nested(DEFAULT_MAX_DEPTH + 1))


def test_a_changed_setting_is_the_limit_at_once_and_undone_after():
    parse(nested(5))  # the default has been read (and kept) before the change
    with override_settings(MAX_JSON_DEPTH=4):
        assert max_json_depth() == 4
        assert parse(nested(4)) == [[[[]]]]
        with pytest.raises(JsonTooDeep, match="at most 4 levels"):
            parse(nested(5))
    assert max_json_depth() == DEFAULT_MAX_DEPTH
    assert parse(nested(5)) == [[[[[]]]]]


def test_other_settings_changes_keep_the_limit():
    with override_settings(MAX_JSON_DEPTH=3):
        with override_settings(MAX_REQUEST_BODY_BYTES=1000):
            with pytest.raises(JsonTooDeep):
                parse(nested(4))


def test_malformed_json_is_still_a_parse_error():
    with pytest.raises(ParseError):
        parse(b'{"a": ')
