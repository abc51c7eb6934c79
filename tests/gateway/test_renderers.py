"""Issue 11: answers are rendered by orjson (gateway/renderers.py) and upstream JSON is parsed by it first
(routing/jsonsafe.py), with DRF's and the standard parser's results as the rule."""

import datetime
import json
import math
import uuid
from decimal import Decimal

import pytest
from django.utils.translation import gettext_lazy
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer

from gateway.renderers import FastJSONRenderer, json_compact
from routing import jsonsafe

drf, fast = JSONRenderer(), FastJSONRenderer()

VALUES = [
    {"id": "resp_1", "output": [{"type": "message", "content": [{"text": "héllo \u2028 and \u2029 ✓"}]}]},
    {"cost": Decimal("0.0000104"), "n": 3, "ok": True, "none": None, "f": 1e-05, "big": 2**63 - 1},
    {"at": datetime.datetime(2026, 11, 26, 12, 0, 1, 123456, tzinfo=datetime.UTC), "day": datetime.date(2026, 1, 2)},
    {"naive": datetime.datetime(2026, 11, 26, 12, 0), "id": uuid.UUID(int=7), "lazy": gettext_lazy("Not found.")},
    [1, "two", [3.5, {"four": []}]],
]


@pytest.mark.parametrize("value", VALUES)
def test_answers_render_as_drf_renders_them(value):
    ours, theirs = fast.render(value), drf.render(value)
    assert json.loads(ours) == json.loads(theirs)
    assert (b"\\u2028" in ours) == (b"\\u2028" in theirs) and "\u2028".encode() not in ours  # JavaScript-safe


def test_datetimes_are_written_as_drf_writes_them():
    value = {"at": datetime.datetime(2026, 11, 26, 12, 0, 1, 5, tzinfo=datetime.UTC)}
    assert fast.render(value) == drf.render(value) == b'{"at":"2026-11-26T12:00:01.000005Z"}'


@pytest.mark.parametrize("value", [{"huge": 2**70}, {1: "a key that is not a string"}], ids=["int", "key"])
def test_what_orjson_refuses_is_rendered_by_drf(value):
    assert fast.render(value) == drf.render(value)


def test_an_unpaired_surrogate_fails_as_it_does_in_drf():
    for renderer in (drf, fast):
        with pytest.raises(UnicodeEncodeError):
            renderer.render({"text": "\ud800"})


def test_an_indented_rendering_is_drfs():
    context = {"indent": 2}
    assert fast.render({"a": [1]}, "application/json", context) == drf.render({"a": [1]}, "application/json", context)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_value_renders_to_what_drf_renders(value):
    assert json.loads(fast.render({"v": value})) == json.loads(drf.render({"v": value}))


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1, "b": [1.5, "x"], "c": {"d": null}}',
        b'{"tokens": 123456789012345678901234567890}',  # beyond 64 bits: an exact integer, as the standard parser
        b'{"n": 18446744073709551615, "m": -9223372036854775808}',
        b'{"seed": -9300000000000000000, "edge": -9223372036854775809}',  # 19 digits below -2**63
        b'{"a": NaN, "b": Infinity}',  # the standard parser's leniency is kept (numbers are checked where read)
        b'{"a": 1e400}',
        b'{"a": 1, "a": 2}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_upstream_json_parses_as_the_standard_parser_reads_it(text):
    ours, theirs = jsonsafe.loads(text), json.loads(text)
    assert repr(ours) == repr(theirs) and type(ours) is type(theirs)


def test_upstream_json_keeps_its_cleaning_of_lone_surrogates_and_bad_utf8():
    assert jsonsafe.loads(b'{"a": "x\\ud800y"}') == {"a": "x\ufffdy"}
    assert jsonsafe.loads(b'{"a": "\xff"}') == {"a": "\ufffd"}
    with pytest.raises(ValueError):
        jsonsafe.loads(b"[" * 5000 + b"]" * 5000)
    assert math.isnan(jsonsafe.loads("NaN"))


def test_a_number_that_is_not_finite_is_written_as_null():
    """Not JSON: DRF's encoder raised (a 500 for an answer served and billed) and the standard encoder sent NaN,
    which an upstream refuses; null is what a JSON reader can take."""
    assert fast.render({"index": math.nan, "x": math.inf}) == b'{"index":null,"x":null}'
    assert json_compact({"x": math.nan}) == b'{"x":null}'


def test_the_access_log_line_stays_ascii():
    from gateway.console.middleware import _encoded

    line = {"model": 'evil\u2028{"forged":1}\u0085é', "status": 200}
    assert _encoded(line) == json.dumps(line, separators=(",", ":")) and _encoded(line).isascii()
    assert _encoded({"status": 200, "route": "api/v1/responses"}) == '{"status":200,"route":"api/v1/responses"}'


def test_request_bodies_are_compact_utf8_json_and_what_orjson_refuses_is_still_sent():
    assert json_compact({"input": "héllo", "n": 1}) == '{"input":"héllo","n":1}'.encode()
    assert json.loads(json_compact({"n": 2**70, "s": "\ud800"[:0]})) == {"n": 2**70, "s": ""}
    assert json_compact({"s": "\ud800"}) == b'{"s":"\\ud800"}'  # the standard encoder's escape
