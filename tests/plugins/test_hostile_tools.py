"""Provider-run tools and server tools against a hostile caller and a hostile upstream (a BYOK endpoint can point
anywhere): malformed tool definitions are a 400 naming the field, never mangled on the way (a string of domains
sent as a list of characters) nor dropped (a location that is no object); a provider's citations that no client can
use (indices out of the text or reversed, booleans, javascript: URLs, unknown annotation kinds) are left out, JSON
and streamed; a provider reporting more searches than it was allowed is billed for the allowed ones and the charge
stays within the hold. The hostile upstream is a loopback server that answers as the OpenAI Responses API would,
with the body a test gives it; the rest runs against the stand-in."""

import json
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.models import Provider
from routing.providers.hosted import SEARCHES_PER_CALL
from tests.billing.books import assert_books
from tests.plugins.test_hosted_tools import ask, hosted_catalog, model_calls  # noqa: F401 (fixture)
from tests.support import Persona, assert_error_envelope, leave_live_stream, sse_events

TEXT = "The launch was on February 1. Sources: Example."
GOOD = {
    "type": "url_citation",
    "url": "https://example.com/launch",
    "title": "Example",
    "start_index": 39,
    "end_index": 46,
}
HOSTILE = [
    {**GOOD, "start_index": -5},
    {**GOOD, "end_index": 10_000},
    {**GOOD, "start_index": 20, "end_index": 10},
    {**GOOD, "start_index": True, "end_index": 3},
    {**GOOD, "start_index": 1.5},
    {**GOOD, "url": "javascript:alert(1)"},
    {**GOOD, "url": "data:text/html,<script>alert(1)</script>"},
    {"type": "made_up", "payload": "x" * 100},
    {"type": "url_citation"},
    "not an object",
]


class Upstream(BaseHTTPRequestHandler):
    """Answers every POST with the server's `reply` (JSON, or SSE events when the request streams)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        return

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.received.append(body)  # type: ignore[attr-defined]
        reply = self.server.reply  # type: ignore[attr-defined]
        pause = len(reply["events"])
        if body.get("stream"):
            pause = reply.get("pause_after", pause)  # the events sent before a pause of PAUSE_S, then the rest
            chunks = [f"data: {json.dumps(event)}\n\n".encode() for event in reply["events"]]
            kind = "text/event-stream"
        else:
            chunks, kind = [json.dumps(reply["body"]).encode()], "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(sum(map(len, chunks))))
        self.end_headers()
        self.wfile.write(b"".join(chunks[:pause]))
        self.wfile.flush()
        if pause < len(chunks):
            time.sleep(PAUSE_S)
            self.wfile.write(b"".join(chunks[pause:]))


@pytest.fixture
def hostile(hosted_catalog):  # noqa: F811 (the fixture)
    """standin-responses pointed at the hostile upstream (standin/search's Responses endpoint)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    server.received, server.reply = [], {}  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = Provider.objects.get(slug="standin-responses")
    provider.base_url = f"http://127.0.0.1:{server.server_port}/v1"
    provider.save()
    yield server
    server.shutdown()
    server.server_close()


def answer(annotations: list, *, searches: int = 0, output_tokens: int = 12) -> dict:
    calls = [
        {"type": "web_search_call", "id": f"ws_{n}", "status": "completed", "action": {"type": "search", "query": "q"}}
        for n in range(searches)
    ]
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": TEXT, "annotations": annotations}],
    }
    return {
        "id": "resp_hostile",
        "object": "response",
        "status": "completed",
        "model": "standin-search",
        "output": [*calls, message],
        "usage": {"input_tokens": 20, "output_tokens": output_tokens, "total_tokens": 20 + output_tokens},
    }


def events(body: dict) -> list[dict]:
    """The Responses stream of `body`: created, its items (a message's text and annotations), completed."""
    out: list[dict] = [{"type": "response.created", "response": {"id": body["id"], "model": body["model"]}}]
    for index, item in enumerate(body["output"]):
        if item["type"] != "message":
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
            continue
        part = item["content"][0]
        out.append({"type": "response.output_text.delta", "output_index": index, "delta": part["text"]})
        out += [
            {"type": "response.output_text.annotation.added", "output_index": index, "annotation": annotation}
            for annotation in part["annotations"]
        ]
    return [*out, {"type": "response.completed", "response": body}]


def reply(server, body: dict) -> None:
    server.reply = {"body": body, "events": events(body)}


WEB = {"type": "web_search"}
PAUSE_S = 1.5


# ---- a hostile caller --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "named"),
    [
        ({**WEB, "filters": {"allowed_domains": "example.com"}}, "filters.allowed_domains"),
        ({**WEB, "filters": {"blocked_domains": [1, 2]}}, "filters.blocked_domains"),
        ({**WEB, "filters": {"allowed_domains": ["x" * 300]}}, "filters.allowed_domains"),
        ({**WEB, "filters": "example.com"}, "filters"),
        ({**WEB, "user_location": "Paris"}, "user_location"),
        ({**WEB, "user_location": {"city": {"name": "Paris"}}}, "user_location"),
        ({**WEB, "search_context_size": "huge"}, "search_context_size"),
        ({**WEB, "search_context_size": {"a": 1}}, "search_context_size"),
    ],
)
def test_a_malformed_web_search_tool_is_a_400_naming_the_field(alice, hosted_catalog, tool, named):  # noqa: F811
    body = assert_error_envelope(ask(alice, [tool]), 400)
    assert named in body["error"]["message"] and body["error"]["metadata"]["param"] == "tools[0]"
    assert model_calls(hosted_catalog) == []  # nothing sent, nothing mangled on the way


# ---- a hostile upstream ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_citations_no_client_can_use_are_left_out(alice, hostile, stream):
    reply(hostile, answer([*HOSTILE, GOOD]))
    response = ask(alice, [WEB], provider={"only": ["standin-responses"]}, stream=stream)
    assert response.status_code == 200, response.content
    if stream:
        streamed, _ = sse_events(response)
        added = [e["annotation"] for e in streamed if e["type"] == "response.output_text.annotation.added"]
        assert added == [GOOD]
        final = streamed[-1]["response"]
    else:
        final = response.json()
    (message,) = [item for item in final["output"] if item["type"] == "message"]
    part = message["content"][0]
    assert part["annotations"] == [GOOD]
    assert part["text"][GOOD["start_index"] : GOOD["end_index"]] == "Example"


@pytest.mark.parametrize("stream", [False, True])
def test_more_searches_than_allowed_are_billed_as_allowed_within_the_hold(alice, hostile, stream):
    reply(hostile, answer([GOOD], searches=1000))
    response = ask(alice, [WEB], provider={"only": ["standin-responses"]}, stream=stream)
    assert response.status_code == 200, response.content
    if stream:
        sse_events(response)
    (sent,) = hostile.received
    assert sent["max_tool_calls"] == SEARCHES_PER_CALL  # what the provider was told
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    tokens = (record.tokens_input * 1 + record.tokens_output * 2) / Decimal(1_000_000)  # standin/search's prices
    assert record.cost == tokens + SEARCHES_PER_CALL * Decimal("0.01")
    assert record.cost <= record.held
    assert "web_search_requests above the 10 the request allowed" in record.usage_anomaly["reasons"]
    assert_books(alice.account_id)


# ---- fusion against hostile members ------------------------------------------------------------------------------


def test_a_panel_member_reporting_absurd_usage_is_billed_within_its_limits(alice, db, standin):
    """A member reporting a billion output tokens (and negative input) is billed as its output limit at most: the
    panel's usage is bounded as the request's own (it was trusted as reported: the caller's whole balance)."""
    from tests.plugins.test_fusion import PANEL, fusion_catalog
    from tests.plugins.test_fusion import post as fusion_post

    fusion_catalog(standin, **{"acme/beta": "text=Answer from beta,output_tokens=1000000000,input_tokens=-7"})
    response = fusion_post(alice, max_output_tokens=300)
    assert response.status_code == 200, response.content
    entry = next(e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "fusion")
    beta = next(member for member in entry["data"]["panel"] if member["model"] == "acme/beta")
    assert beta["tokens"]["input"] == 0 and 0 < beta["tokens"]["output"] <= 300 + 64
    assert beta["cost_usd"] <= (300 + 64) * 1.0 / 1_000_000  # acme/beta: 1 USD per million output tokens
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.cost < Decimal("0.01") and [m["model"] for m in entry["data"]["panel"]] == PANEL
    assert_books(alice.account_id)


def test_provider_run_tools_with_gateway_fusion_are_refused_before_the_panel_when_the_analyst_cannot(
    alice, db, standin
):
    from tests.plugins.test_fusion import fusion_catalog
    from tests.plugins.test_fusion import post as fusion_post

    fusion_catalog(standin)
    body = assert_error_envelope(fusion_post(alice, tools=[WEB]), 400)
    assert "fusion analyst bolt/delta" in body["error"]["message"] and body["error"]["metadata"]["param"] == "tools[0]"
    assert [call for call in standin.received if call["path"].endswith("/chat/completions")] == []  # no panel paid


# ---- a stream cut short after the provider searched --------------------------------------------------------------


@pytest.mark.parametrize("kept", [-1, 3], ids=["cut-after-the-text", "cut-before-any-text"])
def test_searches_made_before_an_upstream_stream_is_cut_are_billed(alice, hostile, kept):
    """The provider searched (its web_search_call items came) and the stream broke before its usage: the searches
    are billed with what was generated (they were billed as none: the provider charges them all the same)."""
    body = answer([GOOD], searches=2)
    hostile.reply = {"body": body, "events": events(body)[:kept]}  # no response.completed: cut
    response = ask(alice, [WEB], provider={"only": ["standin-responses"]}, stream=True)
    streamed, _ = sse_events(response)
    assert streamed[-1]["type"] == "response.failed"
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.status == "failed" and (record.tokens_output > 0) == (kept == -1)
    tokens = (record.tokens_input * 1 + record.tokens_output * 2) / Decimal(1_000_000)
    assert record.cost == tokens + 2 * Decimal("0.01")
    assert_books(alice.account_id)


@pytest.fixture
def frank(transactional_db, hostile):
    return Persona(account_provision(name="frank", plan="payg", credits=Decimal("5")))


@pytest.mark.live
def test_a_client_leaving_after_the_searches_pays_for_them_once(live_gateway, frank, hostile):
    """The client hangs up once the provider's three searches came, before the text (live gateway): recorded
    cancelled, billed the searches and what was generated, once; nothing left held."""
    body = answer([GOOD], searches=3)
    hostile.reply = {"body": body, "events": events(body), "pause_after": 4}  # created and the three searches
    record = leave_live_stream(
        live_gateway.api,
        frank.api_key,
        {
            "model": "standin/search",
            "input": "Search",
            "tools": [WEB],
            "stream": True,
            "provider": {"only": ["standin-responses"]},
        },
        until=lambda seen: seen.count(b"event: response.output_item.done") == 3,
    )
    assert record.status == "cancelled" and record.cancelled
    tokens = (record.tokens_input * 1 + record.tokens_output * 2) / Decimal(1_000_000)
    assert record.cost == tokens + 3 * Decimal("0.01")
    account = assert_books(frank.account_id)
    assert account.reserved == 0 and account.balance == Decimal(5) - record.cost


EIGHT = {f"acme/m{n}": (0.1 * (n + 1), 0.2 * (n + 1), {"chat": 0.5}, 0.5) for n in range(8)}


@pytest.mark.parametrize("stream", [False, True])
def test_a_panel_of_eight_all_failing_is_the_plain_request_error_and_costs_nothing(alice, db, standin, stream):
    from tests.plugins.test_routers_catalog import routers_catalog

    routers_catalog(standin, scripts=dict.fromkeys(EIGHT, "status=500"), models=EIGHT)
    models = list(EIGHT)
    plugin = {"id": "fusion", "analysis_models": models, "model": models[0], "tools": []}
    payload = {"model": "gateway/fusion", "input": "Name a cat", "plugins": [plugin], "stream": stream}
    response = alice.client().post("/api/v1/responses", payload, format="json", HTTP_X_GATEWAY_METADATA="enabled")
    plain = alice.client().post("/api/v1/responses", {"model": models[0], "input": "Name a cat"}, format="json")
    assert response.status_code == plain.status_code and response.status_code >= 500
    assert response.json()["error"]["message"] == plain.json()["error"]["message"]
    entry = response.json()["gateway_metadata"]["pipeline"][0]
    assert entry["summary"] == "all panel models failed" and len(entry["data"]["panel"]) == 8
    assert all(member["status"] == "failed" and member["cost_usd"] == 0 for member in entry["data"]["panel"])
    account = assert_books(alice.account_id)
    assert account.balance == Decimal(10) and account.reserved == 0  # nothing served, nothing charged


def test_a_gateway_fusion_call_whose_eight_members_fail_is_a_failed_call_the_model_reads(alice, db, standin):
    from tests.plugins.test_routers_catalog import routers_catalog

    caller = {"corp/epsilon": (5.0, 10.0, {"chat": 0.9}, 0.8)}
    routers_catalog(standin, scripts=dict.fromkeys(EIGHT, "status=500"), models={**EIGHT, **caller})
    script = json.dumps({"tool_call": "gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})})
    parameters = {"analysis_models": list(EIGHT), "model": "corp/epsilon", "tools": []}
    payload = {
        "model": "corp/epsilon",
        "input": f"Help me <<standin {script}>>",
        "tools": [{"type": "gateway:fusion", "parameters": parameters}],
    }
    response = alice.client().post("/api/v1/responses", payload, format="json")
    assert response.status_code == 200, response.content
    item = response.json()["output"][0]
    assert item["status"] == "failed" and item["failure_reason"] == "all_panels_failed"
    assert len(item["failed_models"]) == 8 and response.json()["output"][-1]["type"] == "message"
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.status == "completed"
    assert_books(alice.account_id)


def test_more_than_one_web_search_tool_is_a_400(alice, hosted_catalog):  # noqa: F811 (the fixture)
    """Two hundred web_search tools would each get max_uses 1 from Anthropic: 200 searches for a hold of 10."""
    body = assert_error_envelope(ask(alice, [WEB] * 200), 400)
    assert (
        "at most one web_search tool" in body["error"]["message"] and body["error"]["metadata"]["param"] == "tools[1]"
    )
    assert model_calls(hosted_catalog) == []
    preview = {"type": "web_search_preview"}  # another spelling of the same tool
    assert_error_envelope(ask(alice, [WEB, preview]), 400)


def test_a_classifier_model_reporting_absurd_usage_is_billed_within_its_limits(alice, db, standin, settings):
    """The auto-router's classifier call (16 output tokens at most) reporting a billion tokens: billed as 16 + the
    margin at most (it was the caller's whole balance, a 402)."""
    from tests.plugins.test_routers_catalog import routers_catalog

    routers_catalog(standin, scripts={"acme/beta": "text=math,output_tokens=1000000000"})
    settings.AUTO_ROUTER_CLASSIFIER_MODEL = "acme/beta"
    payload = {"model": "gateway/auto", "input": "Solve 3x + 5 = 20"}
    response = alice.client().post("/api/v1/responses", payload, format="json", HTTP_X_GATEWAY_METADATA="enabled")
    assert response.status_code == 200, response.content
    entry = next(e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "auto-router")
    assert entry["data"]["classifier"] == "model:acme/beta"
    assert 0 < entry["cost_usd"] <= (1000 * 0.5 + (16 + 64) * 1.0) / 1_000_000  # acme/beta: 0.5 / 1.0 per million
    assert_books(alice.account_id)


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_calling_a_server_tool_three_thousand_times_runs_thirty(alice, hostile, stream):
    """A hostile upstream's answer with 3,000 gateway_datetime calls (every round): 30 run, the rest are failed
    calls the model reads, the last round has no server tools (its calls are not run); the request completes,
    every round billed, the books balanced."""
    calls = [
        {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "gateway_datetime",
            "arguments": "{}",
        }
        for n in range(3000)
    ]
    body = {**answer([]), "output": calls}
    reply(hostile, body)
    hostile.reply["events"] = [
        {"type": "response.created", "response": {"id": "resp_hostile", "model": "standin-search"}},
        *(
            event
            for index, call in enumerate(calls)
            for event in (
                {"type": "response.output_item.added", "output_index": index, "item": {**call, "arguments": ""}},
                {"type": "response.function_call_arguments.delta", "output_index": index, "delta": "{}"},
            )
        ),
        {"type": "response.completed", "response": body},
    ]
    payload = {
        "model": "standin/search",
        "input": "What time is it?",
        "tools": [{"type": "gateway:datetime"}],
        "provider": {"only": ["standin-responses"]},
        "stream": stream,
        "max_output_tokens": 12000,  # room for 3,000 calls' ids, names, arguments (routing.output_bound: 96,000 bytes)
    }
    response = alice.client().post("/api/v1/responses", payload, format="json")
    assert response.status_code == 200
    final = sse_events(response)[0][-1]["response"] if stream else response.json()
    assert final["status"] == "completed"
    items = [item for item in final["output"] if item["type"] == "gateway:datetime"]
    assert len(items) == 3000 and sum(item["status"] == "completed" for item in items) == 30
    assert len(hostile.received) == 2  # the calls' round, then one without server tools
    assert not [t for t in hostile.received[1].get("tools") or [] if t.get("name") == "gateway_datetime"]
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.plugins["server-tools"]["calls"] == {"gateway:datetime": 30}
    assert record.cost > 0 and record.cost <= record.held
    assert_books(alice.account_id)
