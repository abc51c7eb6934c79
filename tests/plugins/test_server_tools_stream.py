"""The server-tool loop streamed: each call the gateway ran is its own output item, added, its progress events
(a web search's in_progress, searching, completed) and done, before the answer's message, with consecutive
sequence numbers; the official openai and openrouter SDKs parse the stream (live gateway, stand-in provider)."""

import json
from decimal import Decimal

import pytest
from openai import OpenAI
from openrouter import OpenRouter

from gateway.billing.provisioning import account_provision
from tests.support import Persona, sse_events

DATETIME_TWICE = json.dumps({"tool_call": "gateway_datetime,gateway_datetime,", "tool_arguments": "{}", "chunks": 2})
PROMPT = f"What time is it? <<standin {DATETIME_TWICE}>>"
ANSWER = "Hello from the local stand-in provider."


def lifecycle(types: list[str]) -> list[str]:
    """The event types with a message's content events folded into one 'message' step."""
    folded: list[str] = []
    for kind in types:
        if kind.startswith(("response.content_part", "response.output_text")):
            kind = "message content"
        if not folded or folded[-1] != kind or kind != "message content":
            folded.append(kind)
    return folded


def test_the_stream_has_each_call_as_its_item_before_the_message(alice, standin_catalog):
    response = alice.client().post(
        "/api/v1/responses",
        {"model": "standin/echo", "input": PROMPT, "tools": [{"type": "gateway:datetime"}], "stream": True},
        format="json",
    )
    events, _ = sse_events(response)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert lifecycle([e["type"] for e in events]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_item.added",
        "message content",
        "response.output_item.done",
        "response.completed",
    ]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"], e["item"]["status"]) for e in added] == [
        (0, "gateway:datetime", "in_progress"),
        (1, "gateway:datetime", "in_progress"),
        (2, "message", "in_progress"),
    ]
    completed = events[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["gateway:datetime", "gateway:datetime", "message"]
    assert completed["output"][0]["status"] == "completed" and completed["usage"]["input_tokens"] > 0


def test_a_streamed_web_search_has_its_searching_events_and_sources(alice, standin_catalog, standin, settings):
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    script = json.dumps({"tool_call": "gateway_web_search,", "tool_arguments": '{"query": "quantum sensors"}'})
    response = alice.client().post(
        "/api/v1/responses",
        {
            "model": "standin/echo",
            "input": f"Search <<standin {script}>>",
            "tools": [{"type": "gateway:web_search", "parameters": {"max_results": 2}}],
            "stream": True,
        },
        format="json",
    )
    events, _ = sse_events(response)
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    assert types[start : start + 5] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    item = events[start + 4]["item"]
    assert item["type"] == "gateway:web_search" and item["action"]["query"] == "quantum sensors"
    assert [s["url"] for s in item["action"]["sources"]] == [
        "https://docs.example.com/guide/intro",
        "https://example.com/blog/2026/launch",
    ]
    assert {e.get("item_id") for e in events[start + 1 : start + 4]} == {item["id"]}
    # the model's second round read the results the gateway appended
    second = [r for r in standin.requests_for("") if "messages" in r["body"] or "input" in r["body"]][-1]["body"]
    assert "docs.example.com/guide/intro" in json.dumps(second)


# ---- the SDKs, live --------------------------------------------------------------------------------------


@pytest.fixture
def dana(transactional_db, standin_catalog):
    return Persona(account_provision(name="dana", plan="payg", credits=Decimal("5")))


@pytest.mark.live
def test_openai_sdk_parses_the_streamed_loop(live_gateway, dana):
    client = OpenAI(base_url=live_gateway.api, api_key=dana.api_key, max_retries=0, timeout=20)
    events = list(
        client.responses.create(model="standin/echo", input=PROMPT, tools=[{"type": "gateway:datetime"}], stream=True)
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == ["gateway:datetime", "gateway:datetime", "message"]
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.output_text == ANSWER
    assert [item.type for item in final.output] == ["gateway:datetime", "gateway:datetime", "message"]


@pytest.mark.live
def test_openrouter_sdk_parses_the_streamed_loop(live_gateway, dana):
    with OpenRouter(api_key=dana.api_key, server_url=live_gateway.api) as client:
        response = client.responses.send(
            model="standin/echo", input=PROMPT, tools=[{"type": "openrouter:datetime"}], stream=True
        )
        with response as event_stream:
            events = list(event_stream)
    assert not [e for e in events if type(e).__name__.startswith("Unknown")], "every event parsed as a known type"
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [type(e.item).__name__ for e in added] == ["OutputDatetimeItem", "OutputDatetimeItem", "OutputMessageItem"]
    final = events[-1].response
    assert final.status == "completed" and final.output[-1].content[0].text == ANSWER
