"""fusion through the stand-in: a three-model panel answers in parallel (each stand-in model scripted with a
latency on its own base URL), the analyst (bolt/delta) returns the structured JSON and writes the final answer as
the request's own routed call (streamed when asked); every call is billed with the request."""

import time
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from plugins.fusion.analysis import analysis_parse
from routing.canonical import Usage
from routing.catalog import endpoint_info
from routing.models import Endpoint
from routing.pricing import usage_cost
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
PANEL = ["acme/alpha", "acme/beta", "bolt/gamma"]
ANALYSIS = '{"consensus":["the answers agree"]}'
LATENCY_MS = 400


def fusion_catalog(standin, **more: str) -> None:
    scripts = {model: f"latency_ms={LATENCY_MS},text=Answer from {model.split('/')[1]}" for model in PANEL}
    scripts["bolt/delta"] = f"text={ANALYSIS}"
    routers_catalog(standin, scripts={**scripts, **more})


def post(persona, plugins: list | None = None, **fields):
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta", "tools": []}
    payload = {"model": "gateway/fusion", "input": "What is a good name for a cat?", **fields}
    payload["plugins"] = plugins if plugins is not None else [plugin]
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def fusion_entry(body: dict) -> dict:
    return next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "fusion")


def test_panel_runs_in_parallel_then_the_analyst_writes_the_answer(alice, db, standin, capsys):
    fusion_catalog(standin)
    started = time.monotonic()
    response = post(alice)
    wall = time.monotonic() - started
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["model"] == "bolt/delta" and body["gateway_metadata"]["strategy"] == "fusion"
    entry = fusion_entry(body)
    panel = entry["data"]["panel"]
    assert [p["model"] for p in panel] == PANEL and all(p["status"] == "completed" for p in panel)
    assert all(p["tokens"]["output"] > 0 and p["cost_usd"] > 0 for p in panel)
    assert entry["data"]["analysis"]["status"] == "completed"
    assert entry["data"]["analysis"]["result"]["consensus"] == ["the answers agree"]
    # Three 400 ms members in parallel: close to one of them, well under the 1.2 s they would take in turn.
    assert entry["data"]["panel_ms"] < 2 * LATENCY_MS
    assert entry["data"]["panel_ms"] >= LATENCY_MS  # it did wait for the members
    started = time.monotonic()
    again = fusion_entry(post(alice).json())["data"]["panel_ms"]
    warm = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nfusion: 3 x {LATENCY_MS} ms panel took {entry['data']['panel_ms']} ms, then {again} ms; whole request "
            f"{wall * 1000:.0f} ms (first of the process), then {warm * 1000:.0f} ms"
        )
    # The final call saw the panel answers and the analysis in its instructions.
    final = list(standin.received)[-1]["body"]
    system = " ".join(m["content"] for m in final["messages"] if m["role"] == "system")
    assert "Answer from alpha" in system and "the answers agree" in system


def test_billing_and_usage_sum_every_call(alice, db, standin):
    fusion_catalog(standin)
    body = post(alice).json()
    entry = fusion_entry(body)
    calls = [*entry["data"]["panel"], entry["data"]["analysis"]]
    assert entry["cost_usd"] == pytest.approx(sum(call["cost_usd"] for call in calls))
    # usage: the three panel answers, the analysis and the final answer
    usage = body["usage"]
    final_input = usage["input_tokens"] - sum(call["tokens"]["input"] for call in calls)
    final_output = usage["output_tokens"] - sum(call["tokens"]["output"] for call in calls)
    assert final_output == max(1, len(ANALYSIS) // 4)  # the stand-in counts 4 characters a token
    assert final_input > sum(call["tokens"]["input"] for call in entry["data"]["panel"])  # it read every answer
    assert [call["tokens"]["output"] for call in entry["data"]["panel"]] == [
        max(1, len(f"Answer from {model.split('/')[1]}") // 4) for model in PANEL
    ]
    final = usage_cost(
        endpoint=endpoint_info(Endpoint.objects.select_related("provider", "model").get(model_id="bolt/delta")),
        usage=Usage(input_tokens=final_input, output_tokens=final_output),
    )
    record = Generation.objects.get(pk="gen-" + body["id"].removeprefix("resp_"))
    assert record.cost == pytest.approx(final + Decimal(str(entry["cost_usd"])), abs=Decimal("0.000001"))
    assert (record.tokens_input, record.tokens_output) == (usage["input_tokens"], usage["output_tokens"])
    assert usage["cost"] == pytest.approx(float(record.cost))
    assert record.router["strategy"] == "fusion" and len(record.router["panel"]) == 3
    assert "Answer from" not in str(record.router)  # statuses and figures, never answer text


def test_a_failing_member_is_reported_and_the_run_goes_on(alice, db, standin):
    fusion_catalog(standin, **{"acme/beta": "status=500"})
    body = post(alice).json()
    panel = {p["model"]: p for p in fusion_entry(body)["data"]["panel"]}
    assert panel["acme/beta"]["status"] == "failed" and panel["acme/beta"]["error"]
    assert panel["acme/alpha"]["status"] == "completed" and body["model"] == "bolt/delta"
    assert "(1 failed)" in fusion_entry(body)["summary"]


def test_all_members_failing_is_the_plain_request_error(alice, db, standin):
    fusion_catalog(standin, **{model: "status=429" for model in PANEL})
    fused = post(alice)
    plain = alice.client().post(
        "/api/v1/responses", {"model": PANEL[0], "input": "What is a good name for a cat?"}, format="json"
    )
    assert fused.status_code == plain.status_code == 429
    assert fused.json()["error"]["message"] == plain.json()["error"]["message"]
    assert fused.json()["gateway_metadata"]["pipeline"][0]["summary"] == "all panel models failed"


def test_recursion_and_routers_are_refused(alice, db, standin):
    fusion_catalog(standin)
    recursive = post(alice, [{"id": "fusion", "analysis_models": ["acme/alpha", "gateway/fusion"], "tools": []}])
    assert "cannot start another" in assert_error_envelope(recursive, 400)["error"]["message"]
    analyst = post(alice, [{"id": "fusion", "analysis_models": ["acme/alpha"], "model": "gateway/fusion"}])
    assert_error_envelope(analyst, 400)


def test_panel_tools_unavailable_are_a_400(alice, db, standin, settings):
    fusion_catalog(standin)
    settings.WEB_SEARCH_SEARXNG_URL = ""
    provider_tool = post(alice, [{"id": "fusion", "analysis_models": PANEL, "tools": [{"type": "web_search"}]}])
    assert "not a panel tool" in assert_error_envelope(provider_tool, 400)["error"]["message"]
    no_engine = post(alice, [{"id": "fusion", "analysis_models": PANEL, "tools": [{"type": "gateway:web_search"}]}])
    message = assert_error_envelope(no_engine, 400)["error"]["message"]
    assert "gateway:web_search" in message and "not available on this gateway" in message
    bad_parameter = [{"type": "gateway:web_fetch", "parameters": {"max_uses": 0}}]
    refused = post(alice, [{"id": "fusion", "analysis_models": PANEL, "tools": bad_parameter}])
    assert "max_uses" in assert_error_envelope(refused, 400)["error"]["message"]
    assert not standin.received  # refused before any call


def test_streaming_streams_the_final_synthesis(alice, db, standin):
    fusion_catalog(standin)
    response = post(alice, stream=True)
    assert response.status_code == 200
    events, _ = sse_events(response)
    text = "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta")
    assert text == ANALYSIS  # the analyst model's (scripted) answer, streamed
    completed = next(e for e in events if e["type"] == "response.completed")["response"]
    assert completed["model"] == "bolt/delta"
    # the usage sums the panel, the analysis and the final answer, streamed as on the JSON path
    panel_output = sum(max(1, len(f"Answer from {model.split('/')[1]}") // 4) for model in PANEL)
    assert completed["usage"]["output_tokens"] == panel_output + 2 * max(1, len(ANALYSIS) // 4)


def test_analysis_parse():
    assert analysis_parse('```json\n{"consensus": ["a"], "blind_spots": ["b"],}\n```')["blind_spots"] == ["b"]
    assert analysis_parse("no json here") is None
    # the openrouter SDK's FusionAnalysisResult shape: objects where the analyst wrote strings
    loose = analysis_parse('{"contradictions": ["x"], "unique_insights": [{"model": "a/b", "insight": "y"}]}')
    assert loose["contradictions"] == [{"topic": "x", "stances": []}]
    assert loose["unique_insights"] == [{"insight": "y", "model": "a/b"}] and loose["partial_coverage"] == []


def test_a_panel_the_balance_cannot_cover_is_a_402_before_any_call(alice, db, standin):
    from gateway.accounts.models import Account

    fusion_catalog(standin)
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("0.000001"))
    refused = post(alice)
    assert "fusion panel" in assert_error_envelope(refused, 402)["error"]["message"]
    assert not standin.received  # nothing was sent to any model


def test_an_analyst_without_endpoints_is_refused_before_the_panel_runs(alice, db, standin):
    fusion_catalog(standin)
    refused = post(alice, [{"id": "fusion", "analysis_models": PANEL, "model": "acme/unknown", "tools": []}])
    assert "acme/unknown" in assert_error_envelope(refused, 404)["error"]["message"]
    assert not standin.received
