"""The request serializers' fast path (responses_api.validation.common: lent field trees, FieldPlan): no field is
built per request, an absent field costs no field machinery, and what a body validates to, or the errors it
gets (absent, null, wrong type, nested, plugins), are the ones DRF's own path gave before it (pinned below, in
order: the 400 body lists them in this order)."""

import json

import pytest
from rest_framework import fields as drf_fields
from rest_framework.exceptions import ValidationError

from responses_api.validation.common import LendingSerializer
from responses_api.validation.request import ResponseCreateRequestSerializer

HI = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
DEFAULTS = {
    "stream": False,
    "store": False,
    "background": None,
    "max_tool_calls": 30,
    "parallel_tool_calls": None,
    "service_tier": "auto",
}
BENCH = {"model": "bench/chat", "instructions": "Be brief.", "input": "Say hello", "max_output_tokens": 64}
RICH = {
    "model": "bench/chat",
    "input": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
    "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}}},
    "reasoning": {"effort": "low", "summary": "auto"},
    "metadata": {"user": "alice"},
    "provider": {"sort": "price", "max_price": {"prompt": 1}},
    "plugins": [{"id": "web", "max_results": 3}, {"id": "fusion", "tools": [{"type": "gateway:web_search"}]}],
}
NOT_HONOURED = {"reasoning": {"mode": "pro"}, "plugins": [{"id": "web", "max_results": "3"}], "temperature": "hot"}


def outcome(body) -> tuple[bool, str]:
    serializer = ResponseCreateRequestSerializer(data=body)
    valid = serializer.is_valid()
    return valid, json.dumps(serializer.validated_data if valid else serializer.errors)


def test_no_field_is_built_per_request(monkeypatch):
    """Given the trees built by a first validation of each body, when they are validated again, valid or not,
    then no field is constructed but the request's own serializers (one per request, one per plugin entry)."""
    bodies = [BENCH, RICH, {**BENCH, **NOT_HONOURED}, {"input": 5}]
    for body in bodies:
        outcome(body)
    built: list[str] = []
    init = drf_fields.Field.__init__

    def counting_init(self, *args, **kwargs):
        if not isinstance(self, LendingSerializer):
            built.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(drf_fields.Field, "__init__", counting_init)
    for _ in range(3):
        for body in bodies:
            outcome(body)
    assert built == []


def test_an_absent_field_costs_no_field_machinery(monkeypatch):
    """Absent fields (most of a request's 41) are skipped or take their constant default without their
    validate_empty_values (DRF's SkipField path); the fields the body holds go through it."""
    seen: list[tuple[str, bool]] = []
    validate_empty_values = drf_fields.Field.validate_empty_values

    def recording(self, data):
        if self.parent is not None:  # not the request's serializer itself
            seen.append((self.field_name, data is drf_fields.empty))
        return validate_empty_values(self, data)

    monkeypatch.setattr(drf_fields.Field, "validate_empty_values", recording)
    assert outcome(BENCH)[0]
    assert sorted(seen) == [(name, False) for name in sorted(BENCH)]


B = {"model": "a/b", "input": "hi"}
NULL = ["This field may not be null."]
PINNED = [
    ({}, False, {"model": ["model (or models) is required"]}),
    ([B], False, {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}),
    (B, True, {"model": "a/b", "input": HI, **DEFAULTS}),
    (
        {
            **B,
            "temperature": None,
            "top_p": None,
            "background": None,
            "previous_response_id": None,
            "instructions": None,
        },
        True,
        {
            "model": "a/b",
            "input": HI,
            "instructions": None,
            "stream": False,
            "store": False,
            "background": None,
            "previous_response_id": None,
            "temperature": None,
            "top_p": None,
            "max_tool_calls": 30,
            "parallel_tool_calls": None,
            "service_tier": "auto",
        },
    ),
    (
        {**B, "top_k": None, "stream": None, "store": None, "user": None, "text": None, "tools": None},
        False,
        {"stream": NULL, "store": NULL, "top_k": NULL, "tools": NULL, "user": NULL, "text": NULL},
    ),
    (
        {"model": ["a/b"], "input": "hi", "temperature": "hot", "top_k": 1.0, "stream": 1, "store": True, "user": 7},
        False,
        {
            "model": ["must be a JSON string"],
            "stream": ["must be a JSON boolean (true or false)"],
            "store": ["only false is supported: this endpoint stores nothing"],
            "temperature": ["must be a finite JSON number"],
            "top_k": ["must be a JSON integer"],
            "user": ["must be a JSON string"],
        },
    ),
    (
        {**B, "background": True, "previous_response_id": "resp_1", "service_tier": "fast", "max_tool_calls": 0},
        False,
        {
            "background": ["background mode is not supported: this endpoint is stateless"],
            "previous_response_id": [
                "is not supported: this endpoint is stateless; send the full conversation in input"
            ],
            "max_tool_calls": ["Ensure this value is greater than or equal to 1."],
        },
    ),
    (
        {**B, "service_tier": "fast", "instructions": "", "parallel_tool_calls": True},
        True,
        {
            "model": "a/b",
            "input": HI,
            "instructions": "",
            **DEFAULTS,
            "parallel_tool_calls": True,
            "service_tier": "priority",
        },
    ),
    (
        {**B, "instructions": "\ud800", "metadata": {"k": 1}, "include": ["nope"], "truncation": "x"},
        False,
        {
            "instructions": ["must be valid Unicode text (no unpaired surrogates)"],
            "include": {"0": ['"nope" is not a valid choice.']},
            "metadata": {"k": ["must be a JSON string"]},
            "truncation": ['"x" is not a valid choice.'],
        },
    ),
    (
        {
            **B,
            "reasoning": {"mode": "pro", "effort": "extreme", "max_tokens": -1},
            "text": {"format": {"type": "json_schema"}},
        },
        False,
        {
            "reasoning": {
                "effort": ['"extreme" is not a valid choice.'],
                "mode": ['"pro" is not honoured by any provider this gateway routes to'],
                "max_tokens": ["Ensure this value is greater than or equal to 0."],
            },
            "text": {"format": {"name": ["is required for json_schema"], "schema": ["is required for json_schema"]}},
        },
    ),
    (
        {
            **B,
            "reasoning": None,
            "provider": None,
            "prompt": None,
            "text": {"format": {"type": "text"}, "verbosity": None},
        },
        True,
        {
            "model": "a/b",
            "input": HI,
            **DEFAULTS,
            "prompt": None,
            "provider": None,
            "reasoning": None,
            "text": {"format": {"type": "text"}, "verbosity": None},
        },
    ),
    (
        {
            **B,
            "provider": {"sort": "cheapest", "max_price": {"prompt": "1"}, "order": []},
            "debug": {},
            "trace": {"trace_id": ""},
        },
        False,
        {
            "provider": {
                "sort": ["\"cheapest\" is not valid; expected one of ['price', 'throughput', 'latency', 'exacto']"],
                "max_price": {"prompt": ["must be a finite JSON number"]},
            },
            "trace": {"trace_id": ["This field may not be blank."]},
        },
    ),
    (
        {**B, "plugins": [{"id": "context-compression"}, {"id": "pareto-router", "enabled": False}]},
        True,
        {
            "model": "a/b",
            "input": HI,
            **DEFAULTS,
            "plugins": [
                {"id": "context-compression", "enabled": True, "engine": "middle-out"},
                {"id": "pareto-router", "enabled": False, "price_source": "prompt"},
            ],
        },
    ),
    (
        {**B, "plugins": [{"id": "web", "max_results": "3"}, {"id": "fusion", "tools": [{"type": "gateway:fusion"}]}]},
        False,
        {
            "plugins": [
                {"max_results": ["must be a JSON integer"]},
                {
                    "tools": {
                        "0": {
                            "non_field_errors": [
                                "'gateway:fusion' is not a panel tool; a panel can use gateway:web_search, "
                                "gateway:web_fetch, gateway:datetime, gateway:search_models (gateway:fusion never: a "
                                "fusion run cannot start another)"
                            ]
                        }
                    }
                },
            ]
        },
    ),
    (
        {**B, "cache_control": {}, "prompt_cache_options": {"mode": "explicit", "ttl": None}, "prompt": {"id": "p"}},
        False,
        {"prompt_cache_options": {"ttl": NULL}, "cache_control": {"type": ["This field is required."]}},
    ),
]


@pytest.mark.parametrize(("body", "valid", "expected"), PINNED)
def test_outcomes_stay_those_of_drf(body, valid, expected):
    """Absent, null, wrong types, defaults and validate_<name> methods, nested objects and plugins: the same
    values and errors, keys in the same order, on a fresh tree and on a reused one."""
    for _ in range(2):
        assert outcome(body) == (valid, json.dumps(expected))


def test_strict_strings_are_checked_for_surrogates_once():
    # A strict string field leaves DRF's per-character surrogate walk out (check_text refuses the same strings)
    from rest_framework.validators import ProhibitSurrogateCharactersValidator

    from gateway.fields import MSG_UNICODE, CharField

    field = CharField()
    assert not any(isinstance(v, ProhibitSurrogateCharactersValidator) for v in field.validators)
    with pytest.raises(ValidationError) as refused:
        field.run_validation("caf\udce9")
    assert refused.value.detail == [MSG_UNICODE]
    assert field.run_validation("café " * 1000) == "café " * 1000
