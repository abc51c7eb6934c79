"""Request validation of POST /responses: each rule gives 400 in the error envelope naming the field
(examples, then property-based with hypothesis)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.errors import _flatten_validation
from responses_api.validation.request import ResponseCreateRequestSerializer
from tests.support import assert_error_envelope

BASE = {"model": "standin/echo", "input": "Hi"}


def errors_of(body: dict) -> dict[str, str]:
    serializer = ResponseCreateRequestSerializer(data=body)
    if serializer.is_valid():
        return {}
    return dict(_flatten_validation(serializer.errors))


INVALID = [
    ({"store": True}, "store"),
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"background": True}, "background"),
    ({"model": None, "models": None}, "model"),
    ({"input": []}, "input"),
    ({"input": 5}, "input"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input[0].content[0].image_url"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "ftp://x"}]}]},
        "input[0].content[0].image_url",
    ),
    ({"input": [{"role": "user", "content": [{"type": "input_file"}]}]}, "input[0].content[0].file_data"),
    ({"input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]}, "input[0].content[0].type"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[0].output"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"metadata": {"k" * 65: "v"}}, "metadata." + "k" * 65),
    ({"metadata": {"a[b]": "v"}}, "metadata.a[b]"),
    ({"metadata": {"k": "v" * 513}}, "metadata.k"),
    ({"session_id": "s" * 257}, "session_id"),
    ({"user": "u" * 257}, "user"),
    ({"service_tier": "turbo"}, "service_tier"),
    ({"include": ["everything"]}, "include[0]"),
    ({"modalities": ["audio"]}, "modalities[0]"),
    ({"max_tool_calls": 31}, "max_tool_calls"),
    ({"max_tool_calls": 0}, "max_tool_calls"),
    ({"cache_control": {"type": "persistent"}}, "cache_control.type"),
    ({"image_config": {"size": True}}, "image_config.size"),
    ({"tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name"),
    ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "string"}}]}, "tools[0].parameters.type"),
    ({"tools": [{"type": "telepathy"}]}, "tools[0].type"),
    ({"tools": [{"type": "function", "name": "f", "defer_loading": True}]}, "tools"),
    ({"tools": [{"type": "function", "name": "f", "defer_loading": True}, {"type": "gateway:tool_search"}]}, "tools"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "name": "missing"}}, "tool_choice"),
    ({"text": {"format": {"type": "json_schema"}}}, "text.format.name"),
    ({"text": {"verbosity": "loud"}}, "text.verbosity"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"truncation": "sometimes"}, "truncation"),
    ({"route": "random"}, "route"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"provider": {"sort": "cheapest"}}, "provider.sort"),
    ({"provider": {"data_collection": "maybe"}}, "provider.data_collection"),
    ({"provider": {"quantizations": ["int3"]}}, "provider.quantizations[0]"),
    ({"provider": {"max_price": {"prompt": -1}}}, "provider.max_price.prompt"),
    ({"provider": {"preferred_max_latency": {"p42": 1}}}, "provider.preferred_max_latency"),
    ({"plugins": [{"id": "teleport"}]}, "plugins[0].id"),
    ({"plugins": [{"enabled": True}]}, "plugins[0].id"),
    ({"plugins": [{"id": "auto-router", "allowed_models": ["m"] * 1025}]}, "plugins[0].allowed_models"),
    ({"plugins": [{"id": "auto-router", "allowed_models": ["m" * 1025]}]}, "plugins[0].allowed_models"),
    ({"plugins": [{"id": "auto-router", "excluded_models": ["m" * 1000] * 66}]}, "plugins[0].excluded_models"),
    ({"plugins": [{"id": "auto-router", "cost_quality_tradeoff": 11}]}, "plugins[0].cost_quality_tradeoff"),
    ({"plugins": [{"id": "auto-router", "cost_tier": "cheap"}]}, "plugins[0].cost_tier"),
    ({"plugins": [{"id": "pareto-router", "min_coding_score": 1.5}]}, "plugins[0].min_coding_score"),
    ({"plugins": [{"id": "pareto-router", "max_price": -0.1}]}, "plugins[0].max_price"),
    ({"plugins": [{"id": "fusion", "analysis_models": []}]}, "plugins[0].analysis_models"),
    ({"plugins": [{"id": "fusion", "analysis_models": ["m"] * 9}]}, "plugins[0].analysis_models"),
    ({"plugins": [{"id": "fusion", "max_tool_calls": 17}]}, "plugins[0].max_tool_calls"),
    ({"plugins": [{"id": "fusion", "max_tool_calls": 0}]}, "plugins[0].max_tool_calls"),
    ({"plugins": [{"id": "fusion", "tools": [{"type": "web"}] * 9}]}, "plugins[0].tools"),
    ({"plugins": [{"id": "context-compression", "engine": "squeeze"}]}, "plugins[0].engine"),
]


@pytest.mark.parametrize("patch,field", INVALID, ids=[field for _, field in INVALID])
def test_each_rule_names_its_field(patch, field):
    found = errors_of({**BASE, **patch})
    assert field in found, found


VALID = [
    {"models": ["a/b", "c/d"]},
    {"service_tier": "fast", "metadata": {"k" * 64: "v" * 512}, "session_id": "s" * 256, "user": "u" * 256},
    {"max_tool_calls": 30, "include": ["reasoning.encrypted_content"], "modalities": ["text", "image"]},
    {
        "tools": [
            {"type": "function", "name": "f", "defer_loading": True},
            {"type": "function", "name": "g"},
            {"type": "gateway:tool_search"},
            {"type": "web_search_preview"},
            {"type": "mcp", "server_url": "x"},
        ],
        "tool_choice": {"type": "function", "name": "g"},
    },
    {
        "input": [
            {"role": "developer", "content": "d"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]},
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "s"}],
                "signature": "x",
                "format": "anthropic-claude-v1",
            },
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "ok"}]},
        ]
    },
    {
        "plugins": [
            {"id": "auto-router", "allowed_models": ["anthropic/*"], "cost_quality_tradeoff": 0},
            {"id": "fusion", "analysis_models": ["m"] * 8, "max_tool_calls": 16, "tools": []},
            {"id": "pareto-router", "min_coding_score": 0, "max_price": 0},
            {"id": "moderation"},
            {"id": "web", "max_results": 3},
            {"id": "web-fetch", "max_uses": 2},
            {"id": "response-healing"},
            {"id": "file-parser", "pdf": {"engine": "native"}},
            {"id": "context-compression"},
        ]
    },
    {
        "provider": {
            "order": ["x"],
            "sort": {"by": "price", "partition": "none"},
            "preferred_min_throughput": 50,
            "max_price": {"prompt": 1, "completion": 2},
            "zdr": True,
            "data_collection": "deny",
        },
        "route": "fallback",
        "truncation": "auto",
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "image_config": {"size": "1024x1024", "n": 2, "styles": ["a"]},
        "reasoning": {"effort": "high"},
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}, "verbosity": "low"},
    },
]


@pytest.mark.parametrize("patch", VALID)
def test_valid_requests_pass(patch):
    assert errors_of({**BASE, **patch}) == {}


def test_fast_is_an_alias_of_priority():
    serializer = ResponseCreateRequestSerializer(data={**BASE, "service_tier": "fast"})
    assert serializer.is_valid() and serializer.validated_data["service_tier"] == "priority"


def test_the_api_answers_400_in_the_envelope(alice):
    response = alice.client().post("/api/v1/responses", {**BASE, "store": True, "metadata": {"a[": "b"}}, format="json")
    body = assert_error_envelope(response, 400)
    assert "store" in body["error"]["message"] and "metadata.a[" in body["error"]["metadata"]["fields"]


# ---- property-based --------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
FIELDS = [
    "model",
    "models",
    "input",
    "instructions",
    "stream",
    "store",
    "temperature",
    "top_p",
    "max_output_tokens",
    "max_tool_calls",
    "tools",
    "tool_choice",
    "include",
    "modalities",
    "metadata",
    "service_tier",
    "session_id",
    "user",
    "cache_control",
    "image_config",
    "plugins",
    "provider",
    "reasoning",
    "text",
    "truncation",
    "route",
    "prompt",
    "debug",
    "trace",
    "previous_response_id",
    "background",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6))
def test_any_json_body_validates_without_crashing(body):
    """Whatever the body, validation answers (valid, or errors with a field path), never an exception."""
    serializer = ResponseCreateRequestSerializer(data=body)
    if not serializer.is_valid():
        assert all(path and message for path, message in _flatten_validation(serializer.errors))


# What a JSON body can carry and we store: no lone surrogates, no NUL (rejected with a 400 of their own).
WIRE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(WIRE_CHARS, min_size=1, max_size=80), st.text(WIRE_CHARS, max_size=600), max_size=20))
def test_metadata_limits_hold(metadata):
    found = errors_of({**BASE, "metadata": metadata})
    ok = (
        len(metadata) <= 16
        and all(len(k) <= 64 and "[" not in k and "]" not in k for k in metadata)
        and all(len(v) <= 512 for v in metadata.values())
    )
    assert (found == {}) == ok, (found, metadata)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-5, max_value=40))
def test_max_tool_calls_range(value):
    assert (errors_of({**BASE, "max_tool_calls": value}) == {}) == (1 <= value <= 30)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"[a-z]{1,6}/[a-z0-9.-]{1,8}", fullmatch=True), min_size=0, max_size=12))
def test_fusion_analysis_models_count(models):
    found = errors_of({**BASE, "plugins": [{"id": "fusion", "analysis_models": models}]})
    assert (found == {}) == (1 <= len(models) <= 8)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4))
def test_the_endpoint_never_answers_500(alice, body):
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code in (200, 400, 402, 404, 503), response.content


def test_non_standard_json_constants_are_rejected(alice):
    response = alice.client().generic(
        "POST", "/api/v1/responses", '{"model": "a/b", "input": "x", "top_p": NaN}', content_type="application/json"
    )
    assert_error_envelope(response, 400)
