"""/chat/completions and /messages refuse an unknown field inside their own nested objects (a 400 naming its path),
and the OpenAPI document says so on each of those objects (`additionalProperties: false`), so schema and
validation agree (issue 28, item 7: the schema fuzz test's fuzzing phase sent `output_config: {"": ...}`, which the
schema allowed and the door refused)."""

import pytest
from django.test import Client

from tests.frontdoors.test_chat import post as post_chat
from tests.frontdoors.test_messages import post as post_message
from tests.frontdoors.test_redteam_doors import CHAT, MESSAGE, anthropic_error
from tests.support import assert_error_envelope

WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
CHAT_CASES = [
    ({"stream": True, "stream_options": {"include_usage": True, "x": 1}}, "stream_options.x", "ChatStreamOptions"),
    ({"tools": [{"type": "function", "function": WEATHER, "x": 1}]}, "tools[0].x", "ChatTool"),
    ({"tools": [{"type": "function", "function": {**WEATHER, "x": 1}}]}, "tools[0].function.x", "ChatFunction"),
    ({"response_format": {"type": "json_object", "x": 1}}, "response_format.x", "ChatResponseFormat"),
    (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}, "x": 1}}},
        "response_format.json_schema.x",
        "ChatJsonSchema",
    ),
    ({"web_search_options": {"x": 1}}, "web_search_options.x", "ChatWebSearchOptions"),
    (
        {"web_search_options": {"user_location": {"type": "approximate", "x": 1}}},
        "web_search_options.user_location.x",
        "ChatUserLocation",
    ),
    (
        {"web_search_options": {"user_location": {"type": "approximate", "approximate": {"city": "Paris", "x": 1}}}},
        "web_search_options.user_location.approximate.x",
        "ChatApproximateLocation",
    ),
]
MESSAGE_CASES = [
    ({"thinking": {"type": "disabled", "x": 1}}, "thinking.x", "AnthropicThinking"),
    ({"metadata": {"user_id": "u", "x": 1}}, "metadata.x", "AnthropicMetadata"),
    ({"tool_choice": {"type": "auto", "x": 1}}, "tool_choice.x", "AnthropicToolChoice"),
    ({"tools": [{"name": "w", "input_schema": {"type": "object"}, "x": 1}]}, "tools[0].x", "AnthropicTool"),
    ({"output_config": {"x": 1}}, "output_config.x", "AnthropicOutputConfig"),
    (
        {"output_config": {"format": {"type": "json_schema", "schema": {}, "x": 1}}},
        "output_config.format.x",
        "AnthropicOutputFormat",
    ),
]


@pytest.fixture(scope="module")
def schemas(django_db_setup, django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        return Client().get("/api/v1/openapi.json").json()["components"]["schemas"]


@pytest.mark.parametrize("extra,path,component", CHAT_CASES, ids=[case[2] for case in CHAT_CASES])
def test_chat_nested_objects_are_closed_in_validation_and_schema(
    alice, standin_catalog, schemas, extra, path, component
):
    body = assert_error_envelope(post_chat(alice, {**CHAT, **extra}), 400)
    assert path in body["error"]["metadata"]["fields"], body
    assert schemas[component].get("additionalProperties") is False


@pytest.mark.parametrize("extra,path,component", MESSAGE_CASES, ids=[case[2] for case in MESSAGE_CASES])
def test_messages_nested_objects_are_closed_in_validation_and_schema(
    alice, standin_catalog, schemas, extra, path, component
):
    assert f"{path}: unknown field" in anthropic_error(post_message(alice, {**MESSAGE, **extra}), 400)
    assert schemas[component].get("additionalProperties") is False
