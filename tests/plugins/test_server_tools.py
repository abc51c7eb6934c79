"""The server-tool loop through the stand-in provider (its `tool_call` directive with a comma-separated list makes
the model call those tools in turn, one per round): several rounds, max_tool_calls stopping it, a caller function
tool ending it, defer_loading tools found by tool_search, billing summing every round, unsupported tools 400."""

import json
from decimal import Decimal

import pytest

from gateway.billing.models import Generation

ANSWER = "Hello from the local stand-in provider."  # the stand-in's text once it calls no tool
METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
}


def ask(client, script: dict, *, tools: list, stream: bool = False, **body):
    directive = json.dumps({"chunks": 1, **script})
    payload = {"model": "standin/echo", "input": f"Hello <<standin {directive}>>", "tools": tools, **body}
    if stream:
        payload["stream"] = True
    return client.post("/api/v1/responses", payload, format="json", **METADATA)


def server_entry(body: dict) -> dict:
    [entry] = [e for e in body["gateway_metadata"]["pipeline"] if e["type"] == "server_tools"]
    return entry


def test_datetime_two_rounds_then_the_answer(alice, standin_catalog, standin):
    standin.clear()
    response = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,gateway_datetime,", "tool_arguments": '{"timezone": "Europe/Paris"}'},
        tools=[{"type": "gateway:datetime"}],
    )
    assert response.status_code == 200, response.content
    body = response.json()
    types = [item["type"] for item in body["output"]]
    assert types == ["gateway:datetime", "gateway:datetime", "message"], body["output"]
    assert body["output"][0]["timezone"] == "Europe/Paris" and body["output"][0]["status"] == "completed"
    assert body["output"][-1]["content"][0]["text"] == ANSWER
    entry = server_entry(body)
    assert entry["data"]["calls"] == {"gateway:datetime": 2} and entry["data"]["rounds"] == 3
    sent = standin.requests_for("")
    assert len(sent) == 3
