"""gateway:fusion as a server tool and fusion panels with tools, through the stand-in: the model (corp/epsilon,
scripted to call gateway_fusion once) gets the analysis and the panel answers as its tool result and answers from
them; the call is a gateway:fusion item with its own pipeline entry, billed and counted in the usage; recursion
is refused; a panel searches the web (the stand-in SearXNG) and every member's rounds and searches are billed; a
panel that fails entirely is a failed call the model reads, not a failed request."""

import json
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.canonical import Usage
from routing.catalog import endpoint_info
from routing.models import Endpoint
from routing.pricing import usage_cost
from routing.standin.server import _prompt_text
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import Persona, assert_error_envelope, leave_live_stream, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
PANEL = ["acme/alpha", "acme/beta", "bolt/gamma"]
CALLER = "corp/epsilon"
ANALYSIS = '{"consensus":["short names win"]}'  # no comma: the stand-in's path script splits on commas
ANSWER = "Hello from the local stand-in provider."
SEARCH_PRICE = Decimal("0.01")


def catalog(standin, **more: str) -> None:
    scripts = {model: f"text=Answer from {model.split('/')[1]}" for model in PANEL}
    scripts["bolt/delta"] = f"text={ANALYSIS}"
    routers_catalog(standin, scripts={**scripts, **more})


def price_of(model: str, input_tokens: int, output_tokens: int) -> Decimal:
    endpoint = endpoint_info(Endpoint.objects.select_related("provider", "model").get(model_id=model))
    return usage_cost(endpoint=endpoint, usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens))


def ask(persona, parameters: dict | None = None, *, tool_type: str = "gateway:fusion", **fields):
    script = json.dumps({"tool_call": "gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})})
    parameters = {"analysis_models": PANEL, "model": "bolt/delta", "tools": [], **(parameters or {})}
    parameters = {name: value for name, value in parameters.items() if value is not None}
    payload = {
        "model": CALLER,
        "input": f"Help me name my cat <<standin {script}>>",
        "tools": [{"type": tool_type, "parameters": parameters}],
        **fields,
    }
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def entry_named(body: dict, name: str) -> dict:
    return next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == name)


def sent_to(standin, upstream_model: str) -> list[dict]:
    return [r["body"] for r in standin.requests_for("/chat/completions") if r["body"].get("model") == upstream_model]


def test_the_model_calls_fusion_and_answers_from_its_result(alice, db, standin):
    catalog(standin)
    response = ask(alice)
    assert response.status_code == 200, response.content
    body = response.json()
    assert [item["type"] for item in body["output"]] == ["gateway:fusion", "message"]
    assert body["output"][-1]["content"][0]["text"] == ANSWER and body["model"] == CALLER
    item = body["output"][0]
    assert item["status"] == "completed" and item["id"].startswith("fu_") and "failed_models" not in item
    assert [(r["model"], r["content"]) for r in item["responses"]] == [
        (model, f"Answer from {model.split('/')[1]}") for model in PANEL
    ]
    assert item["analysis"] == {
        "consensus": ["short names win"],
        "contradictions": [],
        "partial_coverage": [],
        "unique_insights": [],
        "blind_spots": [],
    }
    assert entry_named(body, "server-tools")["data"]["calls"] == {"gateway:fusion": 1}
    fusion = entry_named(body, "gateway:fusion")
    assert fusion["type"] == "server_tools" and fusion["data"]["analyst"] == "bolt/delta"
    assert [p["status"] for p in fusion["data"]["panel"]] == ["completed"] * 3
    calls = [*fusion["data"]["panel"], fusion["data"]["analysis"]]
    assert fusion["cost_usd"] == pytest.approx(sum(call["cost_usd"] for call in calls)) and fusion["cost_usd"] > 0
    # the panel got the model's question, no tools; the model's second round read the analysis and the answers
    for model in PANEL:
        [member] = sent_to(standin, model.split("/")[1])
        assert "Name a cat" in json.dumps(member) and not member.get("tools")
    first, second = sent_to(standin, "epsilon")
    assert [t["function"]["name"] for t in first["tools"]] == ["gateway_fusion"]
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert "Answer from alpha" in result["content"] and "short names win" in result["content"]
    # billed with the request: the caller's two rounds at its price plus the panel and the analysis; usage sums all
    usage = body["usage"]
    own_input = usage["input_tokens"] - sum(call["tokens"]["input"] for call in calls)
    own_output = usage["output_tokens"] - sum(call["tokens"]["output"] for call in calls)
    assert own_input > 0 and own_output == max(1, len('{"prompt": "Name a cat"}') // 4) + len(ANSWER) // 4
    record = Generation.objects.get(pk="gen-" + body["id"].removeprefix("resp_"))
    expected = price_of(CALLER, own_input, own_output) + Decimal(str(fusion["cost_usd"]))
    assert record.cost == pytest.approx(expected, abs=Decimal("0.000001"))
    assert (record.tokens_input, record.tokens_output) == (usage["input_tokens"], usage["output_tokens"])
    assert usage["cost"] == pytest.approx(float(record.cost))


def test_the_analyst_defaults_to_the_calling_model_and_openrouter_spelling_is_kept(alice, db, standin):
    catalog(standin, **{CALLER: f"text={ANALYSIS}"})
    body = ask(alice, {"model": None}, tool_type="openrouter:fusion").json()
    # the caller's scripted text comes with its call: the round's message, then the call's item, then the answer
    assert [item["type"] for item in body["output"]] == ["message", "openrouter:fusion", "message"]
    assert entry_named(body, "gateway:fusion")["data"]["analyst"] == CALLER
    assert body["output"][1]["analysis"]["consensus"] == ["short names win"]


def test_a_failing_member_is_listed_and_an_all_failing_panel_is_a_failed_call(alice, db, standin):
    catalog(standin, **{"acme/beta": "status=500"})
    item = ask(alice).json()["output"][0]
    assert item["status"] == "completed" and [r["model"] for r in item["responses"]] == ["acme/alpha", "bolt/gamma"]
    assert item["failed_models"][0]["model"] == "acme/beta" and item["failed_models"][0]["status_code"] == 500

    catalog(standin, **{model: "status=429" for model in PANEL})
    response = ask(alice)
    assert response.status_code == 200  # the model reads the failure and answers
    body = response.json()
    item = body["output"][0]
    assert item["status"] == "failed" and item["failure_reason"] == "all_panels_failed"
    assert [(f["model"], f["status_code"]) for f in item["failed_models"]] == [(model, 429) for model in PANEL]
    assert body["output"][-1]["content"][0]["text"] == ANSWER
    assert "analysis" not in entry_named(body, "gateway:fusion")["data"]  # no analysis without an answer
    [result] = [m for m in sent_to(standin, "epsilon")[1]["messages"] if m["role"] == "tool"]
    assert "every panel model failed" in result["content"]


def test_recursion_is_refused(alice, db, standin):
    catalog(standin)
    fusion_with_the_tool = alice.client().post(
        "/api/v1/responses",
        {
            "model": "gateway/fusion",
            "input": "Name a cat",
            "tools": [{"type": "gateway:fusion"}],
            "plugins": [{"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta", "tools": []}],
        },
        format="json",
    )
    assert (
        "cannot be given the gateway:fusion tool"
        in assert_error_envelope(fusion_with_the_tool, 400)["error"]["message"]
    )
    panel_calls_fusion = ask(alice, {"tools": [{"type": "gateway:fusion"}]})
    assert "a fusion run cannot start another" in assert_error_envelope(panel_calls_fusion, 400)["error"]["message"]
    router_member = ask(alice, {"analysis_models": ["acme/alpha", "gateway/fusion"]})
    assert "gateway/fusion is a router" in assert_error_envelope(router_member, 400)["error"]["message"]
    plugin_panel_calls_fusion = alice.client().post(
        "/api/v1/responses",
        {
            "model": "gateway/fusion",
            "input": "Name a cat",
            "plugins": [{"id": "fusion", "analysis_models": PANEL, "tools": [{"type": "openrouter:fusion"}]}],
        },
        format="json",
    )
    assert "cannot start another" in assert_error_envelope(plugin_panel_calls_fusion, 400)["error"]["message"]
    assert not standin.received  # every refusal before any model call


@pytest.fixture
def searxng(settings, standin):
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    settings.WEB_SEARCH_PRICES = {"searxng": str(SEARCH_PRICE)}


SEARCH_ONCE = json.dumps({"tool_call": "gateway_web_search,", "tool_arguments": '{"query": "quantum sensors"}'})


def test_a_panel_searches_the_web_by_default_and_each_member_is_billed_for_its_rounds(alice, db, standin, searxng):
    catalog(standin)
    response = alice.client().post(
        "/api/v1/responses",
        {
            "model": "gateway/fusion",
            "input": f"What is new in quantum sensors? <<standin {SEARCH_ONCE}>>",
            "plugins": [{"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta"}],  # tools omitted
        },
        format="json",
        **METADATA,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    entry = entry_named(body, "fusion")
    assert (
        entry["data"]["tools"] == ["gateway:web_search", "gateway:web_fetch"] and entry["data"]["max_tool_calls"] == 4
    )
    assert len(standin.requests_for("/search")) == 3  # one search per member
    for member in entry["data"]["panel"]:
        assert member["status"] == "completed" and member["rounds"] == 2
        assert member["tool_calls"] == {"gateway:web_search": 1}
        upstream = member["model"].split("/")[1]
        first, second = sent_to(standin, upstream)
        declared = [t["function"]["name"] for t in first["tools"]]
        assert declared == ["gateway_web_search", "gateway_web_fetch"]
        assert "docs.example.com/guide/intro" in json.dumps(second)  # the results went back to the member
        # every round's tokens (as the stand-in counted the input) and the search, at the member's price
        counted = _standin_tokens(standin, upstream)
        assert (member["tokens"]["input"], member["tokens"]["output"]) == tuple(map(sum, zip(*counted, strict=True)))
        rounds = price_of(member["model"], member["tokens"]["input"], member["tokens"]["output"])
        assert Decimal(str(member["cost_usd"])) == pytest.approx(rounds + SEARCH_PRICE, abs=Decimal("0.0000001"))
    # the request is billed for all of it, the final answer included
    calls = [*entry["data"]["panel"], entry["data"]["analysis"]]
    assert entry["cost_usd"] == pytest.approx(sum(call["cost_usd"] for call in calls))
    record = Generation.objects.get(pk="gen-" + body["id"].removeprefix("resp_"))
    final_input = body["usage"]["input_tokens"] - sum(call["tokens"]["input"] for call in calls)
    final_output = body["usage"]["output_tokens"] - sum(call["tokens"]["output"] for call in calls)
    final = price_of("bolt/delta", final_input, final_output)
    assert record.cost == pytest.approx(final + Decimal(str(entry["cost_usd"])), abs=Decimal("0.000001"))
    assert record.cost > 3 * SEARCH_PRICE


def _standin_tokens(standin, upstream: str) -> list[tuple[int, int]]:
    """(input, output) tokens of each round the stand-in answered a searching member, as it counts them (4
    characters a token): the answer text and, in the first round, the search call's arguments."""
    rounds = []
    for request in sent_to(standin, upstream):
        called = not any(m.get("role") == "tool" for m in request["messages"])
        said = f"Answer from {upstream}" + ('{"query": "quantum sensors"}' if called else "")
        rounds.append((max(1, len(_prompt_text(request)) // 4), max(1, len(said) // 4)))
    return rounds


def test_without_a_search_engine_the_panel_has_no_tools_by_default(alice, db, standin, settings):
    settings.WEB_SEARCH_SEARXNG_URL = ""
    catalog(standin)
    body = (
        alice.client()
        .post(
            "/api/v1/responses",
            {
                "model": "gateway/fusion",
                "input": "Name a cat",
                "plugins": [{"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta"}],
            },
            format="json",
            **METADATA,
        )
        .json()
    )
    assert entry_named(body, "fusion")["data"]["tools"] == []
    assert not any(r["body"].get("tools") for r in standin.requests_for("/chat/completions"))


def test_max_tool_calls_bounds_each_member(alice, db, standin, searxng):
    catalog(standin)
    script = json.dumps({"tool_call": ",".join(["gateway_web_search"] * 5), "tool_arguments": '{"query": "x"}'})
    body = (
        alice.client()
        .post(
            "/api/v1/responses",
            {
                "model": "gateway/fusion",
                "input": f"Search a lot <<standin {script}>>",
                "plugins": [
                    {
                        "id": "fusion",
                        "analysis_models": PANEL[:1],
                        "model": "bolt/delta",
                        "max_tool_calls": 2,
                        "tools": [{"type": "gateway:web_search", "parameters": {"max_results": 2}}],
                    }
                ],
            },
            format="json",
            **METADATA,
        )
        .json()
    )
    [member] = entry_named(body, "fusion")["data"]["panel"]
    assert member["tool_calls"] == {"gateway:web_search": 2} and member["rounds"] == 3  # the last without tools
    assert member["status"] == "completed"


def test_a_streamed_fusion_call_has_its_events(alice, db, standin):
    catalog(standin)
    response = ask(alice, stream=True)
    events, _ = sse_events(response)
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    fusion = [t for t in types[start:] if t.startswith("response.fusion_call")]
    assert fusion[0] == "response.fusion_call.in_progress" and fusion[-1] == "response.fusion_call.completed"
    assert (
        fusion.count("response.fusion_call.panel.added") == 3
        and fusion.count("response.fusion_call.panel.completed") == 3
    )
    assert fusion[-3:-1] == ["response.fusion_call.analysis.in_progress", "response.fusion_call.analysis.completed"]
    added = events[start]
    assert added["item"]["type"] == "gateway:fusion" and added["item"]["status"] == "in_progress"
    ids = {e["item_id"] for e in events if e["type"].startswith("response.fusion_call")}
    assert ids == {added["item"]["id"]}
    completed = events[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["gateway:fusion", "message"]
    assert completed["usage"]["input_tokens"] > 0 and completed["output"][0]["analysis"]["consensus"]


@pytest.mark.live
def test_a_client_leaving_during_a_fusion_call_is_charged_for_the_panel(live_gateway, transactional_db, standin):
    """The client hangs up while the panel works (live gateway): the members already asked finish and are charged
    with the request, recorded as cancelled; no analysis is asked for after that."""
    catalog(standin, **{model: f"latency_ms=400,text=Answer from {model.split('/')[1]}" for model in PANEL})
    erin = Persona(account_provision(name="erin", plan="payg", credits=Decimal("100")))
    script = json.dumps({"tool_call": "gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})})
    record = leave_live_stream(
        live_gateway.api,
        erin.api_key,
        {
            "model": CALLER,
            "input": f"Help me name my cat <<standin {script}>>",
            "tools": [{"type": "gateway:fusion", "parameters": {"analysis_models": PANEL, "model": "bolt/delta"}}],
            "stream": True,
        },
        until=lambda seen: b"response.fusion_call.panel.added" in seen,
    )
    assert record.status == "cancelled"
    members = [sent_to(standin, model.split("/")[1]) for model in PANEL]
    assert all(len(sent) == 1 for sent in members) and not sent_to(standin, "delta")  # no analysis after that
    panel = sum(
        price_of(model, max(1, len(_prompt_text(sent[0])) // 4), len(f"Answer from {model.split('/')[1]}") // 4)
        for model, sent in zip(PANEL, members, strict=True)
    )
    [first_round] = sent_to(standin, "epsilon")
    caller = price_of(CALLER, max(1, len(_prompt_text(first_round)) // 4), len('{"prompt": "Name a cat"}') // 4)
    assert record.cost == pytest.approx(caller + panel, abs=Decimal("0.0000001"))
    assert record.tokens_output == len('{"prompt": "Name a cat"}') // 4 + sum(
        len(f"Answer from {model.split('/')[1]}") // 4 for model in PANEL
    )


def test_a_panel_the_credits_cannot_cover_is_a_failed_call_before_any_member_runs(alice, db, standin):
    from gateway.accounts.models import Account

    catalog(standin)
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("0.1"))  # the request's hold fits
    response = ask(alice, {"max_completion_tokens": 100_000}, max_tool_calls=1, max_output_tokens=50)
    assert response.status_code == 200, response.content
    item = response.json()["output"][0]
    assert item["status"] == "failed" and item["failure_reason"] == "insufficient_credits"
    assert "can cost up to" in item["error"]
    assert all(not sent_to(standin, model.split("/")[1]) for model in [*PANEL, "bolt/delta"])
