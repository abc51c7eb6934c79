"""A hostile upstream that ignores max_output_tokens (issue 28, item 5): what reaches the client is cut at the
request's output bound (routing.output_bound: 8 bytes of text per token the request allows, at least 256 bytes),
ends incomplete for max_output_tokens in each door's own form, is billed as what the request allowed, and no
`*.done` payload repeats more than was relayed. JSON answers are bounded the same way."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from gateway.billing.models import Generation
from routing.output_bound import OPAQUE_OUTPUT_BYTES
from tests.golden import FIXTURES
from tests.support import sse_events

MAX_TOKENS = 16
BOUND = max(8 * MAX_TOKENS, 256)  # bytes of output text the request allows (the floor: 256)
LARGE_TOKENS = 200  # a bound above the floor: 1,600 bytes
FLOOD = 1_000_000  # bytes the upstream sends instead
RESPONSES_WIRE = {"provider": {"only": ["standin-responses"]}}
CHAT_WIRE = {"provider": {"only": ["standin-chat"]}}
ANTHROPIC_WIRE = {"provider": {"only": ["standin-anthropic"]}}


def flooding(field: str = "text", extra: str = "") -> str:
    return f'Hi <<standin {{"flood": {FLOOD}, "flood_field": "{field}"{extra}}}>>'


def assert_billed_as_allowed(generation_id: str, tokens: int = MAX_TOKENS) -> Generation:
    record = Generation.objects.get(id=generation_id)
    assert record.status == "incomplete" and record.finish_reason == "max_output_tokens"
    assert record.tokens_output == tokens  # what the request allowed, not the upstream's 250,000
    assert record.cost > 0
    return record


@pytest.fixture
def hosted_catalog(standin_catalog):
    """standin/search: the Responses wire runs the provider-run tools (tests/fixtures/web/hosted_catalog.yaml)."""
    with open("/dev/null", "w") as quiet:
        call_command("load_catalog", str(Path(FIXTURES) / "web" / "hosted_catalog.yaml"), stdout=quiet)
    return standin_catalog


# ---- POST /responses ----------------------------------------------------------------------------------------


def test_a_flooding_stream_is_cut_at_the_bound_and_ends_incomplete(alice, standin_catalog):
    # Given an upstream that streams 1 MB of text for a request allowing 16 output tokens
    body = {"model": "standin/echo", "input": flooding(), "max_output_tokens": MAX_TOKENS, "stream": True}
    response = alice.client().post("/api/v1/responses", {**body, **RESPONSES_WIRE}, format="json")
    assert response.status_code == 200
    events, raw = sse_events(response)
    # Then the text relayed is the bound exactly, and the stream ends incomplete for max_output_tokens
    relayed = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
    assert len(relayed.encode()) == BOUND
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    # And every done event carries exactly what was relayed, never more
    [text_done] = [event for event in events if event["type"] == "response.output_text.done"]
    [part_done] = [event for event in events if event["type"] == "response.content_part.done"]
    [item_done] = [event for event in events if event["type"] == "response.output_item.done"]
    assert text_done["text"] == part_done["part"]["text"] == item_done["item"]["content"][0]["text"] == relayed
    assert last["response"]["output"][0]["content"][0]["text"] == relayed
    assert len(raw) < 20 * BOUND + 8000  # deltas, four done copies and the lifecycle envelopes
    # And it is billed as the 16 tokens the request allowed
    assert last["response"]["usage"]["output_tokens"] == MAX_TOKENS
    assert_billed_as_allowed(response["X-Generation-Id"])


@pytest.mark.parametrize("field", ["reasoning", "tool_arguments"])
def test_flooding_reasoning_and_tool_arguments_count_against_the_bound(alice, standin_catalog, field):
    # Given an upstream flooding its reasoning (or a function call's arguments), on the Chat Completions wire
    extra = ', "tool_call": "auto"' if field == "tool_arguments" else ""
    body = {
        "model": "standin/echo",
        "input": flooding(field, extra),
        "max_output_tokens": LARGE_TOKENS,
        "stream": True,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        **CHAT_WIRE,
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    events, _ = sse_events(response)
    # Then all the generated text together stays within the bound, and the answer ends incomplete
    kinds = ("response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta")
    relayed = "".join(event["delta"] for event in events if event["type"] in kinds)
    added = [event["item"] for event in events if event["type"] == "response.output_item.added"]
    names = "".join(item.get("call_id", "") + item.get("name", "") for item in added)  # a call's id and name count
    assert len(relayed.encode()) + len(names.encode()) == 8 * LARGE_TOKENS
    assert events[-1]["type"] == "response.incomplete"
    done = [event for event in events if event["type"].endswith(".done")]
    assert all(len(json.dumps(event)) < 8 * LARGE_TOKENS + 2000 for event in done)
    assert_billed_as_allowed(response["X-Generation-Id"], LARGE_TOKENS)


def test_a_flooding_json_answer_is_cut_at_the_bound(alice, standin_catalog):
    # Given an upstream answering 1 MB of text (not streamed) for a request allowing 16 output tokens
    body = {"model": "standin/echo", "input": flooding(), "max_output_tokens": MAX_TOKENS, **RESPONSES_WIRE}
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200
    result = response.json()
    # Then the answer is the bound's worth of text, incomplete for max_output_tokens, billed as allowed
    assert len(result["output"][0]["content"][0]["text"].encode()) == BOUND
    assert result["status"] == "incomplete" and result["incomplete_details"] == {"reason": "max_output_tokens"}
    assert result["usage"]["output_tokens"] == MAX_TOKENS
    assert_billed_as_allowed(response["X-Generation-Id"])


def test_a_cut_reasoning_answer_is_billed_the_tokens_its_bound_allowed(alice, standin_catalog):
    # Given a reasoning request (low effort: Anthropic's thinking budget of 2,048 tokens on top of the 16 asked)
    allowed = MAX_TOKENS + 2048
    body = {
        "model": "standin/echo",
        "input": flooding(),
        "max_output_tokens": MAX_TOKENS,
        "reasoning": {"effort": "low"},
        "stream": True,
        **ANTHROPIC_WIRE,
    }
    # When the upstream floods it
    response = alice.client().post("/api/v1/responses", body, format="json")
    events, _ = sse_events(response)
    relayed = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
    # Then it is cut at the bound of the tokens allowed with the thinking budget, and billed exactly those tokens,
    # which the hold covered (never more than was held)
    assert len(relayed.encode()) == 8 * allowed
    assert events[-1]["response"]["usage"]["output_tokens"] == allowed
    record = assert_billed_as_allowed(response["X-Generation-Id"], allowed)
    assert record.cost <= record.held


@pytest.mark.parametrize("stream", [True, False])
def test_a_flood_of_provider_run_items_is_cut_at_their_bound(alice, hosted_catalog, stream):
    # Given a request offering the code interpreter, and an upstream answering with 2 MiB of provider-run items
    flood = 2 * 1024 * 1024
    body = {
        "model": "standin/search",
        "input": f'Run it <<standin {{"flood": {flood}, "flood_field": "hosted"}}>>',
        "max_output_tokens": MAX_TOKENS,
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "stream": stream,
        **RESPONSES_WIRE,
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200
    if stream:
        events, raw = sse_events(response)
        items = [event["item"] for event in events if event["type"] == "response.output_item.done"]
        result = events[-1]["response"]
        assert events[-1]["type"] == "response.incomplete"
        assert len(raw) < 3 * OPAQUE_OUTPUT_BYTES  # each item in its done event and the final response
    else:
        result = response.json()
        items = result["output"]
    # Then the items relayed stay within the provider-run bound, and the answer ends incomplete, cut
    assert 0 < len(json.dumps(items)) <= OPAQUE_OUTPUT_BYTES + 64 * 1024
    assert len(json.dumps(result["output"])) <= OPAQUE_OUTPUT_BYTES + 64 * 1024
    assert result["status"] == "incomplete" and result["incomplete_details"] == {"reason": "max_output_tokens"}
    assert Generation.objects.get(id=response["X-Generation-Id"]).status == "incomplete"


def test_a_flooding_reasoning_signature_is_cut(alice, standin_catalog):
    # Given an upstream whose reasoning block comes with a 2 MiB signature
    flood = 2 * 1024 * 1024
    body = {
        "model": "standin/echo",
        "input": f'Think <<standin {{"flood": {flood}, "flood_field": "signature"}}>>',
        "max_output_tokens": MAX_TOKENS,
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "stream": True,
        **ANTHROPIC_WIRE,
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    events, raw = sse_events(response)
    # Then the signature is not relayed (nor kept), and the answer ends incomplete at the bound
    assert len(raw) < OPAQUE_OUTPUT_BYTES
    assert events[-1]["type"] == "response.incomplete"
    assert_billed_as_allowed(response["X-Generation-Id"], MAX_TOKENS + 2048)


# ---- POST /chat/completions -----------------------------------------------------------------------------------


def test_a_flooding_chat_stream_finishes_with_length(alice, standin_catalog):
    body = {
        "model": "standin/echo",
        "messages": [{"role": "user", "content": flooding()}],
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
        **RESPONSES_WIRE,
    }
    response = alice.client().post("/api/v1/chat/completions", body, format="json")
    assert response.status_code == 200
    raw = b"".join(response.streaming_content).decode()
    chunks = [json.loads(block[6:]) for block in raw.split("\n\n") if block.startswith("data: {")]
    relayed = "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])
    assert len(relayed.encode()) == BOUND
    [finish] = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"] if choice["finish_reason"]]
    assert finish == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == MAX_TOKENS
    assert_billed_as_allowed(chunks[0]["id"])


# ---- POST /messages -------------------------------------------------------------------------------------------


def test_a_flooding_messages_stream_stops_with_max_tokens(alice, standin_catalog):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=alice.api_key)
    body = {
        "model": "standin/echo",
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "messages": [{"role": "user", "content": flooding()}],
        **ANTHROPIC_WIRE,
    }
    response = client.post("/api/v1/messages", body, format="json")
    assert response.status_code == 200
    raw = b"".join(response.streaming_content).decode()
    events = []
    for block in filter(None, raw.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        events.append((lines["event"], json.loads(lines["data"])))
    relayed = "".join(data["delta"]["text"] for kind, data in events if kind == "content_block_delta")
    assert len(relayed.encode()) == BOUND
    [delta] = [data for kind, data in events if kind == "message_delta"]
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert delta["usage"]["output_tokens"] == MAX_TOKENS
    assert events[-1][0] == "message_stop"
    [start] = [data for kind, data in events if kind == "message_start"]
    assert_billed_as_allowed(start["message"]["id"])


def test_flooding_json_answers_end_in_each_doors_own_form(alice, standin_catalog):
    # Chat Completions: finish_reason "length"
    chat = {"model": "standin/echo", "messages": [{"role": "user", "content": flooding()}], "max_tokens": MAX_TOKENS}
    body = alice.client().post("/api/v1/chat/completions", {**chat, **CHAT_WIRE}, format="json").json()
    [choice] = body["choices"]
    assert len(choice["message"]["content"].encode()) == BOUND and choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == MAX_TOKENS
    assert_billed_as_allowed(body["id"])
    # Messages: stop_reason "max_tokens"
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=alice.api_key)
    asked = [{"role": "user", "content": flooding()}]
    messages = {"model": "standin/echo", "max_tokens": MAX_TOKENS, "messages": asked, **ANTHROPIC_WIRE}
    body = client.post("/api/v1/messages", messages, format="json").json()
    assert len(body["content"][0]["text"].encode()) == BOUND and body["stop_reason"] == "max_tokens"
    assert body["usage"]["output_tokens"] == MAX_TOKENS
    assert_billed_as_allowed(body["id"])
