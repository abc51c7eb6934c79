"""The official `openai` and `openrouter` SDKs, unchanged, against a live gunicorn gateway and the
stand-in provider over loopback HTTP."""

import json
from decimal import Decimal

import pytest
from openai import OpenAI
from openrouter import OpenRouter

from gateway.billing.provisioning import account_provision
from tests.support import Persona

pytestmark = pytest.mark.live


@pytest.fixture
def dana(transactional_db, standin_catalog):
    """A funded account whose data is committed, so the gunicorn processes see it."""
    return Persona(account_provision(name="dana", plan="payg", credits=Decimal("5")))


def openai_client(live_gateway, persona) -> OpenAI:
    return OpenAI(base_url=live_gateway.api, api_key=persona.api_key, max_retries=0, timeout=20)


def test_openai_sdk_non_streaming(live_gateway, dana):
    response = openai_client(live_gateway, dana).responses.create(model="standin/echo", input="Say hello")
    assert response.status == "completed"
    assert response.output_text == "Hello from the local stand-in provider."
    assert response.usage.output_tokens > 0 and response.model == "standin/echo"


def test_openai_sdk_streaming(live_gateway, dana):
    stream = openai_client(live_gateway, dana).responses.create(
        model="standin/echo", input='Count <<standin {"chunks": 5, "text": "one two three four five"}>>', stream=True
    )
    events = list(stream)
    types = [event.type for event in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas == "one two three four five"
    assert events[-1].response.output_text == "one two three four five"


CHAT_WIRE = {"provider": {"only": ["standin-chat"]}}  # so the stand-in records it as Chat Completions


def test_openai_sdk_function_tool_round_trip(live_gateway, dana, standin_catalog):
    client = openai_client(live_gateway, dana)
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        }
    ]
    first = client.responses.create(
        model="standin/echo", tools=tools, input='Weather in Paris? <<standin {"tool_call": "auto"}>>'
    )
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"location": "Paris"}
    second = client.responses.create(
        model="standin/echo",
        tools=tools,
        extra_body=CHAT_WIRE,
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"celsius": 21}'},
        ],
    )
    assert second.output_text == "Hello from the local stand-in provider."
    upstream = standin_catalog.requests_for("/chat/completions")[-1]["body"]
    assert any(m.get("role") == "tool" and m.get("tool_call_id") == call.call_id for m in upstream["messages"])


def test_openrouter_sdk_non_streaming(live_gateway, dana):
    with OpenRouter(api_key=dana.api_key, server_url=live_gateway.api) as client:
        result = client.responses.send(model="standin/echo", input="Say hello")
    assert result.status == "completed"
    assert result.output[0].content[0].text == "Hello from the local stand-in provider."
    assert result.usage.input_tokens > 0 and result.usage.total_tokens == result.usage.input_tokens + 9
    assert result.usage.cost > 0 and result.usage.cost_details.upstream_inference_input_cost > 0
    assert result.usage.is_byok is False and result.model == "standin/echo"


def test_openrouter_sdk_streaming(live_gateway, dana):
    with OpenRouter(api_key=dana.api_key, server_url=live_gateway.api) as client:
        response = client.responses.send(model="standin/echo", input="Say hello", stream=True)
        with response as event_stream:
            events = list(event_stream)
    types = [event.type for event in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert not [e for e in events if type(e).__name__.startswith("Unknown")], "every event parsed as a known type"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Hello from the local stand-in provider."
    completed = events[-1].response
    assert completed.status == "completed" and completed.usage.output_tokens == 9
    assert completed.usage.cost_details.upstream_inference_output_cost > 0
