"""POST /responses refuses an unknown or misspelled field anywhere in its body (a 400 naming its path, as
/chat/completions and /messages do and as the official API does), and the OpenAPI document says so on each closed
object (`additionalProperties: false`); every field the spec and the official SDKs send is still taken (issue 29,
item 2)."""

import pytest
from django.test import Client

from tests.support import assert_error_envelope

BASE = {"model": "standin/echo", "input": "Hi"}
USER = {"role": "user", "content": "Hi"}
CALL = {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def message(*parts: dict, role: str = "user") -> dict:
    return {"type": "message", "role": role, "content": list(parts)}


# (extra body fields, the path the 400 names)
CASES = [
    ({"temprature": 0.2}, "temprature"),
    ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),
    ({"provider": {"sortt": "price"}}, "provider.sortt"),
    ({"provider": {"max_price": {"promt": 1}}}, "provider.max_price.promt"),
    ({"provider": {"sort": {"by": "price", "partion": "none"}}}, "provider.sort.partion"),
    ({"reasoning": {"effort": "low", "budget": 5}}, "reasoning.budget"),
    ({"text": {"verbose": "low"}}, "text.verbose"),
    ({"text": {"format": {"type": "text", "strictly": True}}}, "text.format.strictly"),
    ({"cache_control": {"type": "ephemeral", "scope": "all"}}, "cache_control.scope"),
    ({"prompt_cache_options": {"mode": "explicit", "x": 1}}, "prompt_cache_options.x"),
    ({"stream": True, "debug": {"echo_upstream_body": True, "echo": True}}, "debug.echo"),
    ({"prompt": {"id": "p", "x": 1}}, "prompt.x"),
    ({"trace": {"trace_id": "t", "trace_idd": "u"}}, "trace.trace_idd"),
    ({"plugins": [{"id": "web", "max_result": 3}]}, "plugins[0].max_result"),
    ({"stream": True, "stream_options": {"include_usage": True}}, "stream_options.include_usage"),
    ({"input": [USER, {**USER, "foo": 1}]}, "input[1].foo"),
    ({"input": [message({"type": "input_text", "text": "Hi", "x": 1})]}, "input[0].content[0].x"),
    (
        {"input": [message({"type": "input_text", "text": "Hi", "cache_control": {"type": "ephemeral", "x": 1}})]},
        "input[0].content[0].cache_control.x",
    ),
    (
        {"input": [message({"type": "input_image", "image_url": "https://example.com/a.png", "x": 1})]},
        "input[0].content[0].x",
    ),
    ({"input": [message({"type": "input_file", "file_data": "data:;base64,", "x": 1})]}, "input[0].content[0].x"),
    (
        {"input": [USER, message({"type": "output_text", "text": "Hi", "x": 1}, role="assistant")]},
        "input[1].content[0].x",
    ),
    (
        {"input": [USER, message({"type": "refusal", "refusal": "No", "x": 1}, role="assistant")]},
        "input[1].content[0].x",
    ),
    ({"tools": [WEATHER], "input": [USER, {**CALL, "x": 1}]}, "input[1].x"),
    (
        {
            "tools": [WEATHER],
            "input": [USER, CALL, {"type": "function_call_output", "call_id": "c1", "output": "", "x": 1}],
        },
        "input[2].x",
    ),
    (
        {
            "tools": [WEATHER],
            "input": [
                USER,
                CALL,
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "", "x": 1}],
                },
            ],
        },
        "input[2].output[0].x",
    ),
    ({"input": [USER, {"type": "reasoning", "summary": [], "x": 1}]}, "input[1].x"),
    (
        {"input": [USER, {"type": "reasoning", "summary": [{"type": "summary_text", "text": "", "x": 1}]}]},
        "input[1].summary[0].x",
    ),
    (
        {
            "input": [
                USER,
                {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "", "x": 1}]},
            ]
        },
        "input[1].content[0].x",
    ),
]


@pytest.mark.parametrize(("extra", "path"), CASES, ids=[case[1] for case in CASES])
def test_responses_refuses_unknown_fields_naming_the_path(alice, standin_catalog, standin, extra, path):
    standin.clear()
    response = alice.client().post("/api/v1/responses", {**BASE, **extra}, format="json")
    error = assert_error_envelope(response, 400)["error"]
    assert path in error["metadata"]["fields"], error
    assert "unknown field" in str(error["metadata"]["fields"][path]) or "not a field" in error["message"], error
    assert standin.requests_for() == []


def test_responses_still_takes_the_fields_the_spec_and_the_sdks_send(alice, standin_catalog):
    """Every top-level field the spec lists, and those the openai SDK sends (null where it means unset)."""
    body = {
        **BASE,
        "models": ["standin/echo"],
        "instructions": "Be brief",
        "stream": True,
        "stream_options": {"include_obfuscation": False},
        "store": False,
        "background": False,
        "previous_response_id": None,
        "conversation": None,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "max_output_tokens": 100,
        "max_tool_calls": 5,
        "parallel_tool_calls": True,
        "include": ["reasoning.encrypted_content"],
        "metadata": {"k": "v"},
        "service_tier": "auto",
        "session_id": "s1",
        "user": "u1",
        "safety_identifier": "end-user-1",
        "prompt_cache_key": "k1",
        "cache_control": {"type": "ephemeral", "ttl": "5m"},
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "text"}, "verbosity": "low"},
        "provider": {"sort": {"by": "price", "partition": "none"}, "max_price": {"prompt": 100}},
        "trace": {"trace_id": "t1"},
        "truncation": "disabled",
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200, response.content
    b"".join(response.streaming_content)


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"conversation": "conv_1"}, "conversation"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
        ({"stream": True, "stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation"),
    ],
)
def test_responses_refuses_what_a_stateless_unpadded_gateway_cannot_do(alice, standin_catalog, extra, path):
    response = alice.client().post("/api/v1/responses", {**BASE, **extra}, format="json")
    assert path in assert_error_envelope(response, 400)["error"]["metadata"]["fields"]


CLOSED = [
    "ResponseCreateRequest",
    "ProviderPreferences",
    "MaxPrice",
    "Reasoning",
    "TextConfig",
    "TextFormat",
    "CacheControl",
    "PromptCacheOptions",
    "Debug",
    "Prompt",
    "Trace",
    "ResponseStreamOptions",
]


@pytest.fixture(scope="module")
def document(django_db_setup, django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        return Client().get("/api/v1/openapi.json").json()


@pytest.mark.parametrize("component", CLOSED)
def test_responses_request_objects_are_closed_in_the_schema(document, component):
    assert document["components"]["schemas"][component].get("additionalProperties") is False


def test_responses_input_items_and_parts_are_closed_in_the_schema(document):
    items = document["components"]["schemas"]["ResponseCreateRequest"]["properties"]["input"]["oneOf"][1]["items"]
    for item in items["anyOf"]:
        assert item.get("additionalProperties") is False, item
    message_parts = items["anyOf"][1]["properties"]["content"]["oneOf"][1]["items"]["anyOf"]
    for part in message_parts:
        assert part.get("additionalProperties") is False, part
    sort = document["components"]["schemas"]["ProviderPreferences"]["properties"]["sort"]
    assert sort["oneOf"][1].get("additionalProperties") is False
