"""POST /chat/completions: the Chat Completions request on the /responses pipeline, against the stand-in."""

import json

import pytest
from rest_framework.test import APIClient

from gateway.billing.models import Generation
from routing.models import Provider
from tests.guardrails.test_enforcement import guardrail
from tests.support import assert_error_envelope

CHAT_WIRE = {"provider": {"only": ["standin-chat"]}}


def post(persona, body, **headers):
    return persona.client().post("/api/v1/chat/completions", body, format="json", **headers)


def sse_chunks(response) -> list:
    text = b"".join(response.streaming_content).decode()
    events = [block for block in text.split("\n\n") if block.startswith("data: ")]
    return [event.removeprefix("data: ") for event in events]


def test_a_chat_completion_is_answered_and_billed(alice, standin_catalog):
    response = post(alice, {"model": "standin/echo", "messages": [{"role": "user", "content": "Say hello"}]})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "standin/echo"
    [choice] = body["choices"]
    assert choice["message"]["content"] == "Hello from the local stand-in provider."
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0 and usage["cost"] > 0
    generation = Generation.objects.get(id=body["id"])
    assert float(generation.cost) == pytest.approx(usage["cost"])


def test_the_conversation_reaches_a_chat_upstream_as_sent(alice, standin_catalog):
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    ]
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
    ]
    response = post(
        alice,
        {
            "model": "standin/echo",
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
            "max_completion_tokens": 50,
            "temperature": 0.5,
            **CHAT_WIRE,
        },
    )
    assert response.status_code == 200, response.content
    [sent] = standin_catalog.requests_for("/chat/completions")
    body = sent["body"]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/a.png", "detail": "auto"},
    }
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}
    assert body["max_tokens"] == 50 and body["temperature"] == 0.5 and body["tool_choice"] == "auto"


def test_a_streamed_completion_ends_with_usage_and_done(alice, standin_catalog):
    response = post(
        alice,
        {
            "model": "standin/echo",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": 'Count <<standin {"chunks": 3, "text": "one two three"}>>'}],
        },
    )
    assert response.status_code == 200
    events = sse_chunks(response)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "one two three"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "standin/echo", "messages": []}, "messages"),
        ({"model": "standin/echo", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "standin/echo", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"model": "standin/echo", "messages": [{"role": "user", "content": "x"}], "stop": list("abcde")}, "stop"),
        ({"model": "standin/echo", "messages": [{"role": "user", "content": "x"}], "temperature": "1"}, "temperature"),
    ],
)
def test_bad_requests_name_the_field(alice, standin_catalog, body, field):
    response = post(alice, body)
    error = assert_error_envelope(response, 400)["error"]
    assert field in error["metadata"]["fields"], error


def test_a_failure_after_the_first_byte_is_the_references_error_chunk(alice, standin_catalog):
    """The reference's Chat Completions mid-stream error: a chunk with a top-level `error` (integer code) and
    finish_reason "error", then [DONE]; what was generated is billed."""
    directive = '<<standin {"chunks": 5, "cut_after": 2, "mid_stream_error": 500, "text": "a b c d e"}>>'
    response = post(
        alice,
        {"model": "standin/echo", "stream": True, "messages": [{"role": "user", "content": directive}], **CHAT_WIRE},
    )
    events = sse_chunks(response)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c["choices"])
    assert text and "a b c d e".startswith(text)
    failed = chunks[-1]
    assert failed["choices"][0]["finish_reason"] == "error"
    assert failed["error"]["code"] == 502 and failed["error"]["metadata"]["error_type"] == "provider_unavailable"
    assert failed["provider"] == Provider.objects.get(slug="standin-chat").name  # which provider failed
    generation = Generation.objects.get(id=response["X-Generation-Id"])
    assert generation.status == "failed" and generation.tokens_output > 0


def test_gateway_metadata_and_the_pipeline_are_those_of_responses(alice, standin_catalog):
    response = post(
        alice,
        {"model": "standin/echo", "messages": [{"role": "user", "content": "Hi"}], **CHAT_WIRE},
        HTTP_X_GATEWAY_METADATA="enabled",
    )
    metadata = response.json()["gateway_metadata"]
    assert metadata["attempts"][0]["provider"] == "standin-chat" and metadata["pipeline"] == []
    plugins = [{"id": "web"}]
    refused = post(
        alice, {"model": "standin/echo", "messages": [{"role": "user", "content": "Hi"}], "plugins": plugins}
    )
    on_responses = alice.client().post(
        "/api/v1/responses", {"model": "standin/echo", "input": "Hi", "plugins": plugins}, format="json"
    )
    assert (refused.status_code, refused.json()) == (on_responses.status_code, on_responses.json())


def test_reasoning_is_answered_and_streamed(alice, standin_catalog):
    content = 'Hi <<standin {"reasoning": "Let me think.", "chunks": 2}>>'
    body = {
        "model": "standin/echo",
        "reasoning_effort": "high",
        "messages": [{"role": "user", "content": content}],
        **CHAT_WIRE,
    }
    message = post(alice, body).json()["choices"][0]["message"]
    assert message["reasoning"] == "Let me think." and message["content"] == "Hello from the local stand-in provider."
    assert standin_catalog.requests_for("/chat/completions")[-1]["body"]["reasoning_effort"] == "high"
    chunks = [json.loads(event) for event in sse_chunks(post(alice, {**body, "stream": True}))[:-1]]
    assert "".join(c["choices"][0]["delta"].get("reasoning") or "" for c in chunks if c["choices"]) == "Let me think."


def test_guardrails_and_credits_answer_as_on_responses(alice, standin_catalog):
    guardrail(alice, content_filters=[{"pattern": "(?i)secret", "action": "block", "label": "secrets"}])
    blocked = post(alice, {"model": "standin/echo", "messages": [{"role": "user", "content": "the secret plan"}]})
    assert assert_error_envelope(blocked, 403)["error"]["metadata"]["patterns"] == ["secrets"]
    anthropic_client = APIClient()
    anthropic_client.credentials(HTTP_X_API_KEY=alice.api_key)
    refused = anthropic_client.post(
        "/api/v1/messages",
        {"model": "standin/echo", "max_tokens": 10, "messages": [{"role": "user", "content": "the secret plan"}]},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"
    assert not standin_catalog.requests_for("/chat/completions") and not standin_catalog.requests_for("/messages")
    echoed = post(
        alice, {"model": "standin/echo", "messages": [{"role": "user", "content": "Hi"}], "metadata": {"k": "v"}}
    )
    assert echoed.json()["metadata"] == {"k": "v"}
