"""POST /messages: the Anthropic Messages request on the /responses pipeline, against the stand-in."""

import json

import pytest
from rest_framework.test import APIClient

from gateway.billing.models import Generation

ANTHROPIC_WIRE = {"provider": {"only": ["standin-anthropic"]}}


def post(persona, body):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=persona.api_key)
    return client.post("/api/v1/messages", body, format="json")


def events(response) -> list[tuple[str, dict]]:
    text = b"".join(response.streaming_content).decode()
    out = []
    for block in filter(None, text.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_a_message_is_answered_with_x_api_key_and_billed(alice, standin_catalog):
    response = post(
        alice, {"model": "standin/echo", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["type"] == "message" and body["role"] == "assistant" and body["stop_reason"] == "end_turn"
    assert body["content"] == [{"type": "text", "text": "Hello from the local stand-in provider."}]
    assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0
    assert float(Generation.objects.get(id=body["id"]).cost) == pytest.approx(body["usage"]["cost"])


def test_system_tools_and_tool_results_reach_an_anthropic_upstream(alice, standin_catalog):
    body = {
        "model": "standin/echo",
        "max_tokens": 300,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "Sunny", "is_error": False}],
            },
        ],
        **ANTHROPIC_WIRE,
    }
    response = post(alice, body)
    assert response.status_code == 200, response.content
    [sent] = standin_catalog.requests_for("/messages")
    upstream = sent["body"]
    assert upstream["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert upstream["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert upstream["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "tu_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert upstream["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "tu_1", "content": "Sunny"}
    assert upstream["max_tokens"] == 300


def test_a_tool_call_answer_is_a_tool_use_block(alice, standin_catalog):
    response = post(
        alice,
        {
            "model": "standin/echo",
            "max_tokens": 100,
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": 'Weather? <<standin {"tool_call": "auto"}>>'}],
        },
    )
    body = response.json()
    assert body["stop_reason"] == "tool_use"
    [block] = [b for b in body["content"] if b["type"] == "tool_use"]
    assert block["name"] == "get_weather" and block["input"] == {"location": "Paris"}


def test_a_streamed_message_follows_anthropics_event_order(alice, standin_catalog):
    response = post(
        alice,
        {
            "model": "standin/echo",
            "max_tokens": 100,
            "stream": True,
            "messages": [{"role": "user", "content": 'Count <<standin {"chunks": 3, "text": "one two three"}>>'}],
        },
    )
    assert response.status_code == 200
    stream = events(response)
    kinds = [kind for kind, _ in stream if kind != "ping"]
    assert kinds[0] == "message_start" and kinds[1] == "content_block_start"
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    text = "".join(data["delta"]["text"] for kind, data in stream if kind == "content_block_delta")
    assert text == "one two three"
    [delta] = [data for kind, data in stream if kind == "message_delta"]
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 0


def test_errors_use_anthropics_shape(alice, standin_catalog):
    response = post(alice, {"model": "standin/echo", "messages": [{"role": "user", "content": "Hi"}]})
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in body["error"]["message"]
    unauthenticated = APIClient().post("/api/v1/messages", {}, format="json")
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["type"] == "authentication_error"
    unknown = post(alice, {"model": "nobody/none", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


def test_a_failure_after_the_first_byte_is_an_error_event(alice, standin_catalog):
    directive = '<<standin {"chunks": 5, "cut_after": 4, "mid_stream_error": 529, "text": "a b c d e"}>>'
    response = post(
        alice,
        {
            "model": "standin/echo",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": directive}],
            **ANTHROPIC_WIRE,
        },
    )
    stream = events(response)
    kind, data = stream[-1]
    assert kind == "error" and data["type"] == "error" and data["error"]["type"] in ("overloaded_error", "api_error")
    assert "message_stop" not in [kind for kind, _ in stream]
    kinds = [kind for kind, _ in stream if kind != "ping"]
    assert kinds[:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert kinds[-2:] == ["content_block_stop", "error"]


def test_thinking_round_trips_with_its_signature(alice, standin_catalog):
    directive = '<<standin {"reasoning": "Let me think."}>>'
    body = {
        "model": "standin/echo",
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": f"Hi {directive}"}],
        **ANTHROPIC_WIRE,
    }
    first = post(alice, body).json()
    thinking = first["content"][0]
    assert thinking == {"type": "thinking", "thinking": "Let me think.", "signature": "standin-signature"}
    sent = standin_catalog.requests_for("/messages")[-1]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    replay = {
        **body,
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": "And?"},
        ],
    }
    assert post(alice, replay).status_code == 200
    sent = standin_catalog.requests_for("/messages")[-1]["body"]
    assert sent["messages"][1]["content"][0] == thinking


def test_a_streamed_tool_use_and_thinking(alice, standin_catalog):
    directive = '<<standin {"reasoning": "Hmm.", "tool_call": "auto"}>>'
    response = post(
        alice,
        {
            "model": "standin/echo",
            "max_tokens": 2000,
            "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": f"Weather? {directive}"}],
            **ANTHROPIC_WIRE,
        },
    )
    stream = [(kind, data) for kind, data in events(response) if kind != "ping"]
    starts = [data["content_block"]["type"] for kind, data in stream if kind == "content_block_start"]
    assert starts == ["thinking", "tool_use"]
    deltas = [data["delta"] for kind, data in stream if kind == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "Hmm."
    assert {"type": "signature_delta", "signature": "standin-signature"} in deltas
    arguments = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(arguments) == {"location": "Paris"}
    [delta] = [data for kind, data in stream if kind == "message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use"
