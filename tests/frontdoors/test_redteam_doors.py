"""A user-eyed pass over the three front doors: every field a door takes reaches the upstream in the wire form of
each adapter, or is refused with a 400 naming it (Anthropic's error shape on /messages), never accepted and
dropped. Against the stand-in provider, which records what each endpoint was sent."""

import pytest

from tests.frontdoors.test_chat import post as post_chat
from tests.frontdoors.test_messages import post as post_message
from tests.support import assert_error_envelope

HI = [{"role": "user", "content": "Hi"}]
CHAT = {"model": "standin/echo", "messages": HI}
MESSAGE = {"model": "standin/echo", "max_tokens": 3000, "messages": HI}
EMBEDDING = {"model": "standin/embed", "input": "Hi"}
WIRE_PATH = {"standin-chat": "/chat/completions", "standin-responses": "/responses", "standin-anthropic": "/messages"}


def only(wire: str) -> dict:
    return {"provider": {"only": [wire]}}


def sent_to(standin, wire: str) -> dict:
    """The body the stand-in endpoint of this wire received last."""
    return standin.requests_for(WIRE_PATH[wire])[-1]["body"]


def anthropic_error(response, status: int, error_type: str = "invalid_request_error") -> str:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == error_type, body
    return body["error"]["message"]


# ---- fields no door declares are refused, not dropped ----------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),  # a newer OpenAI field
        ({"temprature": 0.2}, "temprature"),  # a typo
        ({"stream": True, "stream_options": {"include_usage": True, "padding": True}}, "stream_options.padding"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strictly": True}}},
            "response_format.json_schema.strictly",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}, "examples": []}}]},
            "tools[0].function.examples",
        ),
        ({"reasoning": {"effort": "low", "budget": 5}}, "reasoning.budget"),
    ],
)
def test_chat_refuses_fields_it_does_not_take(alice, standin_catalog, standin, extra, field):
    standin.clear()
    error = assert_error_envelope(post_chat(alice, {**CHAT, **extra}), 400)["error"]
    assert field in error["metadata"]["fields"], error
    assert "unknown field" in error["metadata"]["fields"][field]
    assert standin.requests_for() == []


def test_chat_refuses_obfuscation_it_does_not_add(alice, standin_catalog):
    body = {**CHAT, "stream": True, "stream_options": {"include_obfuscation": True}}
    error = assert_error_envelope(post_chat(alice, body), 400)["error"]
    assert "only false" in error["metadata"]["fields"]["stream_options.include_obfuscation"]


def test_chat_takes_include_obfuscation_false_and_the_refused_fields_as_null(alice, standin_catalog):
    """The gateway never pads chunks, so include_obfuscation false is what it does; the refused OpenAI fields
    (logit_bias, audio, ...) sent as null mean unset, as SDKs send them."""
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True, "include_obfuscation": False}}
    assert post_chat(alice, {**body, "logit_bias": None, "audio": None, "functions": None}).status_code == 200


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"metadata": {"user_id": "u", "session": "s"}}, "metadata.session"),
        ({"tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": True}]}, "tools[0].strict"),
        ({"top_a": 0.1}, "top_a"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "x"}}, "thinking.display"),
        ({"tool_choice": {"type": "auto", "parallel": False}}, "tool_choice.parallel"),
    ],
)
def test_messages_refuses_fields_it_does_not_take_in_anthropics_shape(alice, standin_catalog, standin, extra, field):
    standin.clear()
    message = anthropic_error(post_message(alice, {**MESSAGE, **extra}), 400)
    assert message.startswith(f"{field}: unknown field"), message
    assert standin.requests_for() == []


@pytest.mark.parametrize("extra", [{"input_type": "query"}, {"plugins": [{"id": "web"}]}, {"truncate": "END"}])
def test_embeddings_refuses_fields_it_does_not_take(alice, standin_catalog, standin, extra):
    standin.clear()
    response = alice.client().post("/api/v1/embeddings", {**EMBEDDING, **extra}, format="json")
    error = assert_error_envelope(response, 400)["error"]
    assert set(error["metadata"]["fields"]) == set(extra), error
    assert standin.requests_for() == []


# ---- /messages: what a Claude client sends reaches an Anthropic upstream as sent --------------------------------

CACHED = {"type": "ephemeral"}


def test_cache_breakpoints_on_every_block_kind_reach_an_anthropic_upstream(alice, standin_catalog, standin):
    """Claude clients put cache_control on the last block of the conversation, often a tool_result or an image:
    each breakpoint reaches the Anthropic wire where it was put (only text blocks' did)."""
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/a.png"},
                    "cache_control": CACHED,
                },
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://example.com/a.pdf"},
                    "title": "A",
                    "cache_control": CACHED,
                },
                {"type": "document", "source": {"type": "text", "data": "plain"}, "cache_control": CACHED},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}, "cache_control": CACHED}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": CACHED}],
        },
    ]
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    standin.clear()
    body = {**MESSAGE, "messages": messages, "tools": tools, **only("standin-anthropic")}
    assert post_message(alice, body).status_code == 200
    sent = sent_to(standin, "standin-anthropic")["messages"]
    blocks = [block for message in sent for block in message["content"]]
    assert [block["type"] for block in blocks] == ["image", "document", "text", "tool_use", "tool_result"]
    assert all(block.get("cache_control") == CACHED for block in blocks), blocks
