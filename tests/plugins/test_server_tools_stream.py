"""The server-tool loop streamed: each call the gateway ran is its own output item, added, its progress events
(a web search's in_progress, searching, completed; a fusion call's panel and analysis events) and done, before the
answer's message, with consecutive sequence numbers; live: the call's events go out as it runs and the next
round's deltas as the upstream sends them (timed over real HTTP); the official openai and openrouter SDKs parse
the stream (live gateway, stand-in provider)."""

import json
import time
from decimal import Decimal

import pytest
import requests
from openai import OpenAI
from openrouter import OpenRouter

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from tests.plugins.test_fusion_tools import PANEL as FUSION_PANEL
from tests.plugins.test_fusion_tools import catalog as fusion_catalog
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


def test_with_another_post_stage_the_loop_is_relayed_once_it_ends_in_the_same_order(
    alice, standin_catalog, standin, settings
):
    """The `web` plugin's citations need the whole answer: the loop's events are replayed after it, the same ones."""
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    script = json.dumps({"tool_call": "gateway_web_search,", "tool_arguments": '{"query": "quantum sensors"}'})
    events, _ = sse_events(
        alice.client().post(
            "/api/v1/responses",
            {
                "model": "standin/echo",
                "input": f"Search <<standin {script}>>",
                "tools": [{"type": "gateway:web_search", "parameters": {"max_results": 2}}],
                "plugins": [{"id": "web", "max_results": 1}],
                "stream": True,
            },
            format="json",
            HTTP_X_GATEWAY_METADATA="enabled",
        )
    )
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    assert types[start : start + 6] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    completed = events[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["gateway:web_search", "message"]
    assert {e["name"] for e in completed["gateway_metadata"]["pipeline"]} >= {"server-tools", "web"}


def test_a_later_round_failing_mid_stream_fails_in_band_and_bills_what_it_generated(alice, standin_catalog, standin):
    """Round 2's stream breaks after 5 of its 8 text chunks went out: the message is closed, an error event and
    response.failed end the stream; round 1 and the text round 2 generated are billed."""
    script = {"tool_call": "gateway_datetime,", "tool_arguments": "{}", "chunks": 8, "cut_after": 6}
    response = alice.client().post(
        "/api/v1/responses",
        {
            "model": "standin/echo",
            "input": f"Time? <<standin {json.dumps({**script, 'mid_stream_error': 500})}>>",
            "tools": [{"type": "gateway:datetime"}],
            "provider": {"only": ["standin-chat"]},
            "stream": True,
        },
        format="json",
    )
    events, _ = sse_events(response)
    types = [e["type"] for e in events]
    assert types[-4:] == ["response.content_part.done", "response.output_item.done", "error", "response.failed"]
    assert events[-3]["item"]["type"] == "message" and events[-1]["response"]["status"] == "failed"
    assert types.index("response.output_item.done") < types.index("response.output_text.delta")
    sent = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert sent and ANSWER.startswith(sent) and sent != ANSWER
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.status == "failed"
    first_round_output = max(1, len("{}") // 4)  # the stand-in's count for the call it made
    assert record.tokens_output > first_round_output  # round 2's text is billed too (estimated from the text)
    assert record.cost > 0


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


# ---- live: each round and each call as it happens ----------------------------------------------------------


def timed_events(url: str, api_key: str, body: dict) -> list[tuple[float, dict]]:
    """The stream's events over real HTTP, each with the seconds since the request was sent when it arrived."""
    started = time.monotonic()
    timed: list[tuple[float, dict]] = []
    buffer = b""
    with requests.post(
        f"{url}/responses", json={**body, "stream": True}, headers={"Authorization": f"Bearer {api_key}"}, stream=True
    ) as response:
        assert response.status_code == 200
        for chunk in response.iter_content(chunk_size=None):
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                data = [line[6:] for line in block.decode().split("\n") if line.startswith("data: ")]
                if data and data[0] != "[DONE]":
                    timed.append((time.monotonic() - started, json.loads("\n".join(data))))
    return timed


@pytest.mark.live
def test_the_loop_streams_each_round_and_call_as_it_happens(live_gateway, dana, capsys):
    """Round 1 (the call's arguments) and round 2 (the answer) each stream 5 chunks 150 ms apart: the call's item
    goes out as soon as round 1 ends, then the answer's deltas as the upstream sends them, long before it ends."""
    script = {"tool_call": "gateway_datetime,", "tool_arguments": "{}", "chunks": 5, "interval_ms": 150}
    timed = timed_events(
        live_gateway.api,
        dana.api_key,
        {
            "model": "standin/echo",
            "input": f"Time? <<standin {json.dumps(script)}>>",
            "tools": [{"type": "gateway:datetime"}],
        },
    )
    events = [event for _, event in timed]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    at = {
        "call done": next(t for t, e in timed if e["type"] == "response.output_item.done"),
        "first delta": next(t for t, e in timed if e["type"] == "response.output_text.delta"),
        "last delta": [t for t, e in timed if e["type"] == "response.output_text.delta"][-1],
        "completed": next(t for t, e in timed if e["type"] == "response.completed"),
    }
    with capsys.disabled():
        print("\nlive server-tool loop (s since the request): " + ", ".join(f"{k} {v:.3f}" for k, v in at.items()))
    assert (
        events[next(i for i, (_, e) in enumerate(timed) if e["type"] == "response.output_item.done")]["item"]["type"]
        == "gateway:datetime"
    )
    assert at["call done"] < at["first delta"] <= at["last delta"] < at["completed"] + 0.001
    assert at["completed"] - at["call done"] >= 0.45  # the call's item went out before the answer was written
    assert at["last delta"] - at["first delta"] >= 0.45  # the deltas as they came, not one burst at the end
    completed = events[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["gateway:datetime", "message"]
    assert completed["output"][1]["content"][0]["text"] == ANSWER


@pytest.fixture
def erin(transactional_db, standin):
    fusion_catalog(standin)
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("100")))  # holds 31 rounds


FUSION_CALL = json.dumps({"tool_call": "gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})})
FUSION_TOOL = {"analysis_models": FUSION_PANEL, "model": "bolt/delta", "tools": []}


@pytest.mark.live
def test_openrouter_sdk_parses_a_streamed_fusion_call(live_gateway, erin):
    with OpenRouter(api_key=erin.api_key, server_url=live_gateway.api) as client:
        response = client.responses.send(
            model="corp/epsilon",
            input=f"Help me name my cat <<standin {FUSION_CALL}>>",
            tools=[{"type": "openrouter:fusion", "parameters": FUSION_TOOL}],
            stream=True,
        )
        with response as event_stream:
            events = list(event_stream)
    assert not [e for e in events if type(e).__name__.startswith("Unknown")], "every event parsed as a known type"
    fusion = [type(e).__name__ for e in events if e.type.startswith("response.fusion_call")]
    assert fusion == [
        "FusionCallInProgressEvent",
        *["FusionCallPanelAddedEvent"] * 3,
        *["FusionCallPanelCompletedEvent"] * 3,
        "FusionCallAnalysisInProgressEvent",
        "FusionCallAnalysisCompletedEvent",
        "FusionCallCompletedEvent",
    ]
    final = events[-1].response
    assert [type(item).__name__ for item in final.output] == ["OutputFusionServerToolItem", "OutputMessageItem"]
    item = final.output[0]
    assert item.status == "completed" and item.analysis.consensus == ["short names win"]
    assert [r.model for r in item.responses] == FUSION_PANEL


@pytest.mark.live
def test_openai_sdk_reads_a_streamed_fusion_call(live_gateway, erin):
    client = OpenAI(base_url=live_gateway.api, api_key=erin.api_key, max_retries=0, timeout=30)
    events = list(
        client.responses.create(
            model="corp/epsilon",
            input=f"Help me name my cat <<standin {FUSION_CALL}>>",
            tools=[{"type": "gateway:fusion", "parameters": FUSION_TOOL}],
            stream=True,
        )
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed" and events[-1].response.output_text == ANSWER
    assert [item.type for item in events[-1].response.output] == ["gateway:fusion", "message"]
