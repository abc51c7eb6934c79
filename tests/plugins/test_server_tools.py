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


@pytest.mark.parametrize("provider", ["standin-chat", "standin-responses", "standin-anthropic"])
def test_datetime_two_rounds_then_the_answer(alice, standin_catalog, standin, provider):
    """On each wire: the conversation the gateway builds (the model's calls, the results) is what it sends."""
    standin.clear()
    response = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,gateway_datetime,", "tool_arguments": '{"timezone": "Europe/Paris"}'},
        tools=[{"type": "gateway:datetime"}],
        provider={"only": [provider]},
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
    third = json.dumps(sent[2]["body"])
    assert third.count("Europe/Paris") >= 5  # the prompt, both calls' arguments and both results went back to the model


def declared(request: dict) -> list[str]:
    """The function names a stand-in request declared (Chat Completions or Responses wire)."""
    return [t.get("name") or t["function"]["name"] for t in request["body"].get("tools") or []]


def model_requests(standin) -> list[dict]:
    return [r for r in standin.requests_for("") if r["path"].endswith(("/chat/completions", "/responses", "/messages"))]


def test_max_tool_calls_stops_the_loop_and_the_model_answers_without_server_tools(alice, standin_catalog, standin):
    standin.clear()
    body = ask(
        alice.client(),
        {"tool_call": ",".join(["gateway_datetime"] * 6)},
        tools=[{"type": "gateway:datetime"}],
        max_tool_calls=2,
    ).json()
    assert body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["gateway:datetime", "gateway:datetime", "message"]
    assert body["output"][-1]["content"][0]["text"] == ANSWER
    entry = server_entry(body)
    assert entry["data"] == {"calls": {"gateway:datetime": 2}, "rounds": 3, "stopped": "max_tool_calls"}
    sent = model_requests(standin)
    assert [declared(r) for r in sent] == [["gateway_datetime"], ["gateway_datetime"], []]


def test_a_caller_function_tool_ends_the_loop_and_is_returned(alice, standin_catalog, standin):
    standin.clear()
    body = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,get_weather,", "tool_arguments": '{"location": "Paris"}'},
        tools=[{"type": "gateway:datetime"}, WEATHER],
        provider={"only": ["standin-chat"]},  # the Chat Completions wire: the tool result is a `tool` message
    ).json()
    types = [item["type"] for item in body["output"]]
    assert types == ["gateway:datetime", "function_call"], body["output"]
    call = body["output"][1]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"location": "Paris"}
    assert server_entry(body)["data"]["stopped"] == "function_call"
    # the second round saw the datetime result the gateway appended
    second = model_requests(standin)[1]["body"]
    items = second.get("messages", second.get("input", []))
    results = [m for m in items if m.get("role") == "tool" or m.get("type") == "function_call_output"]
    assert len(results) == 1 and "datetime" in (results[0].get("content") or results[0].get("output"))


DEFERRED = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up a customer order by its order number",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    "defer_loading": True,
}


def test_tool_search_finds_a_deferred_tool_and_declares_it_in_the_next_round(alice, standin_catalog, standin):
    standin.clear()
    body = ask(
        alice.client(),
        {"tool_call": "gateway_tool_search,lookup_order,", "tool_arguments": '{"query": "order"}'},
        tools=[{"type": "gateway:tool_search"}, WEATHER, DEFERRED],
    ).json()
    found, call = body["output"]
    assert found["type"] == "gateway:tool_search" and found["query"] == "order"
    assert [match["tool_id"] for match in found["matches"]] == ["lookup_order"]
    assert found["matches"][0]["definition"]["description"] == DEFERRED["description"]
    assert call["type"] == "function_call" and call["name"] == "lookup_order"
    first, second = model_requests(standin)
    assert "lookup_order" not in declared(first) and "lookup_order" in declared(second)


def test_text_the_model_writes_beside_its_calls_comes_before_them_and_stays_when_the_loop_stops(
    alice, standin_catalog, standin
):
    """A round's own items come first, then the calls the gateway ran (the order a live stream sends them); a
    round whose calls are not run (a stop condition holds) keeps its text, and the model reads it next round."""
    standin.clear()
    script = {"tool_call": ",".join(["gateway_datetime"] * 3), "text": "Let me check."}
    stop = [{"type": "step_count_is", "step_count": 1}]
    body = ask(
        alice.client(),
        script,
        tools=[{"type": "gateway:datetime"}],
        stop_server_tools_when=stop,
        provider={"only": ["standin-chat"]},  # the Chat Completions wire: the model's turns are assistant messages
    ).json()
    types = [item["type"] for item in body["output"]]
    assert types == ["message", "gateway:datetime", "message", "message"], types
    assert [item["content"][0]["text"] for item in body["output"] if item["type"] == "message"] == ["Let me check."] * 3
    last = model_requests(standin)[-1]["body"]
    said = [m for m in last.get("messages", []) if m.get("role") == "assistant" and m.get("content")]
    assert len(said) == 2 and declared({"body": last}) == []  # both rounds' text, no server tool declared
    assert server_entry(body)["data"] == {"calls": {"gateway:datetime": 1}, "rounds": 3, "stopped": "step_count_is 1"}


def test_every_round_is_billed_and_usage_sums_them(alice, standin_catalog, standin):
    script = {"tool_call": "gateway_datetime,gateway_datetime,", "input_tokens": 100, "output_tokens": 10}
    response = ask(alice.client(), script, tools=[{"type": "gateway:datetime"}], provider={"only": ["standin-chat"]})
    body = response.json()
    assert body["usage"]["input_tokens"] == 300 and body["usage"]["output_tokens"] == 30
    per_round = (Decimal(100) * Decimal("0.5") + Decimal(10) * Decimal("1.5")) / Decimal(1_000_000)
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert generation.cost == 3 * per_round and generation.tokens_input == 300 and generation.tokens_output == 30
    assert Decimal(str(body["usage"]["cost"])) == 3 * per_round
    assert body["gateway_metadata"]["attempt"] == 1  # each round served at once: no fallback
    assert len(generation.provider_responses) == 3  # the record keeps every round's attempt
    assert generation.plugins["server-tools"] == {"calls": {"gateway:datetime": 2}, "rounds": 3, "stopped": "answered"}


def test_the_hold_covers_every_round_the_loop_may_make(alice, standin_catalog):
    """With server tools, the hold is the worst case of each round (the input growing by a round's output and a
    tool result, up to the context): a balance that covers one round but not the loop is a 402."""
    from gateway.accounts.models import Account

    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("0.05"))
    plain = alice.client().post("/api/v1/responses", {"model": "standin/echo", "input": "Hi"}, format="json")
    assert plain.status_code == 200
    looped = ask(alice.client(), {}, tools=[{"type": "gateway:datetime"}])
    assert looped.status_code == 402
    fewer = ask(alice.client(), {}, tools=[{"type": "gateway:datetime"}], max_tool_calls=1)
    assert fewer.status_code == 200


def test_stop_server_tools_when_stops_after_the_named_tool(alice, standin_catalog, standin):
    standin.clear()
    body = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,gateway_datetime,gateway_datetime,"},
        tools=[{"type": "gateway:datetime"}],
        stop_server_tools_when=[{"type": "has_tool_call", "tool_name": "gateway:datetime"}],
    ).json()
    assert [item["type"] for item in body["output"]] == ["gateway:datetime", "message"]
    assert server_entry(body)["data"]["stopped"] == "has_tool_call gateway:datetime"


def test_the_openrouter_names_are_aliases(alice, standin_catalog):
    body = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,", "tool_arguments": "{}"},
        tools=[{"type": "openrouter:datetime", "parameters": {"timezone": "Asia/Tokyo"}}],
    ).json()
    # the items keep the caller's spelling (the openrouter SDK parses openrouter:datetime as its datetime item)
    assert body["output"][0]["type"] == "openrouter:datetime" and body["output"][0]["timezone"] == "Asia/Tokyo"
    assert body["tools"] == [{"type": "openrouter:datetime", "parameters": {"timezone": "Asia/Tokyo"}}]


def test_a_bad_timezone_is_a_failed_call_the_model_reads(alice, standin_catalog, standin):
    standin.clear()
    body = ask(
        alice.client(),
        {"tool_call": "gateway_datetime,", "tool_arguments": '{"timezone": "Mars/Olympus"}'},
        tools=[{"type": "gateway:datetime"}],
    ).json()
    item = body["output"][0]
    assert item["status"] == "failed" and "Mars/Olympus" in item["error"]
    assert body["output"][-1]["type"] == "message"


def test_search_models_searches_this_gateways_catalog(alice, standin_catalog):
    body = ask(
        alice.client(),
        {"tool_call": "gateway_search_models,", "tool_arguments": '{"query": "stand-in echo"}'},
        tools=[{"type": "gateway:search_models"}],
    ).json()
    item = body["output"][0]
    assert item["type"] == "gateway:search_models" and item["status"] == "completed"
    assert item["query"] == "stand-in echo"


@pytest.mark.parametrize(
    "tool,named",
    [
        ({"type": "gateway:bash"}, "gateway:bash"),
        ({"type": "openrouter:shell"}, "openrouter:shell"),
        ({"type": "code_interpreter"}, "code_interpreter"),
        ({"type": "mcp", "server_url": "https://mcp.example.com"}, "mcp"),
        ({"type": "image_generation"}, "image_generation"),
    ],
)
def test_tools_this_gateway_does_not_run_are_400_naming_them(alice, standin_catalog, tool, named):
    response = ask(alice.client(), {}, tools=[tool])
    assert response.status_code == 400
    assert named in response.json()["error"]["message"]


def test_web_search_without_an_engine_configured_is_400(alice, standin_catalog, settings):
    settings.WEB_SEARCH_SEARXNG_URL = ""
    for engine in ("EXA", "TAVILY", "BRAVE"):
        setattr(settings, f"WEB_SEARCH_{engine}_API_KEY", "")
    response = ask(alice.client(), {}, tools=[{"type": "gateway:web_search"}])
    assert response.status_code == 400 and "gateway:web_search" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"tools": [{"type": "gateway:datetime", "parameters": {"zone": "UTC"}}]},
        {"tools": [{"type": "gateway:search_models", "parameters": {"max_results": "lots"}}]},
        {"tools": [{"type": "gateway:web_fetch", "parameters": {"max_uses": 51}}]},
        {"tools": [{"type": "gateway:datetime"}, {**WEATHER, "name": "gateway_datetime"}]},
        {"tools": [{"type": "gateway:datetime"}], "stop_server_tools_when": [{"type": "step_count_is"}]},
        {"tools": [{"type": "gateway:datetime"}], "stop_server_tools_when": [{"type": "when_bored"}]},
        {"tools": [{"type": "gateway:datetime"}], "max_tool_calls": 31},
    ],
    ids=[
        "unknown-parameter",
        "parameter-type",
        "parameter-range",
        "name-clash",
        "condition-without-field",
        "unknown-condition",
        "over-30",
    ],
)
def test_bad_server_tool_requests_are_400(alice, standin_catalog, body):
    response = alice.client().post("/api/v1/responses", {"model": "standin/echo", "input": "Hi", **body}, format="json")
    assert response.status_code == 400, response.content


@pytest.fixture
def searxng(settings, standin):
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    settings.WEB_SEARCH_PRICES = {"searxng": "0.004"}


def test_each_web_search_is_charged_with_the_rounds(alice, standin_catalog, searxng):
    script = {
        "tool_call": "gateway_web_search,gateway_web_search,",
        "tool_arguments": '{"query": "quantum sensors"}',
        "input_tokens": 100,
        "output_tokens": 10,
    }
    response = ask(alice.client(), script, tools=[{"type": "gateway:web_search"}], provider={"only": ["standin-chat"]})
    body = response.json()
    searches = [item for item in body["output"] if item["type"] == "gateway:web_search"]
    assert len(searches) == 2 and all(len(item["action"]["sources"]) == 5 for item in searches)
    per_round = (Decimal(100) * Decimal("0.5") + Decimal(10) * Decimal("1.5")) / Decimal(1_000_000)
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert generation.cost == 3 * per_round + 2 * Decimal("0.004")


def test_a_search_engine_the_operator_did_not_configure_is_a_failed_call(alice, standin_catalog, searxng):
    body = ask(
        alice.client(),
        {"tool_call": "gateway_web_search,", "tool_arguments": '{"query": "x"}'},
        tools=[{"type": "gateway:web_search", "parameters": {"engine": "exa"}}],
    ).json()
    item = body["output"][0]
    assert item["status"] == "failed" and "exa" in item["error"]


def test_web_fetch_reads_a_page_and_refuses_private_destinations(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True  # the stand-in's pages are on loopback
    standin.clear()
    url = f"{standin.url}/pages/article.html"
    body = ask(
        alice.client(),
        {"tool_call": "gateway_web_fetch,", "tool_arguments": json.dumps({"url": url})},
        tools=[{"type": "gateway:web_fetch"}],
    ).json()
    item = body["output"][0]
    assert item["type"] == "gateway:web_fetch" and item["status"] == "completed" and item["http_status"] == 200
    assert "STANDIN-ARTICLE-TEXT" in json.dumps(model_requests(standin)[1]["body"])  # the model read the page

    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    for target in (url, "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/"):
        body = ask(
            alice.client(),
            {"tool_call": "gateway_web_fetch,", "tool_arguments": json.dumps({"url": target})},
            tools=[{"type": "gateway:web_fetch"}],
        ).json()
        item = body["output"][0]
        assert item["status"] == "failed" and "not a public address" in item["error"], item


def test_web_fetch_max_uses_caps_the_fetches(alice, standin_catalog, standin, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    script = {
        "tool_call": "gateway_web_fetch,gateway_web_fetch,",
        "tool_arguments": json.dumps({"url": f"{standin.url}/pages/notes.txt"}),
    }
    body = ask(alice.client(), script, tools=[{"type": "gateway:web_fetch", "parameters": {"max_uses": 1}}]).json()
    first, second = body["output"][:2]
    assert first["status"] == "completed" and second["status"] == "failed" and "max_uses" in second["error"]


def test_a_later_round_no_candidate_answers_fails_the_request_and_bills_the_rounds_run(
    alice, standin_catalog, monkeypatch
):
    """The upstream choke point answers the first call, then every provider is down (the stand-in cannot be told
    to fail only its second round)."""
    from routing import upstream
    from routing.errors import ErrorType, UpstreamError

    real, calls = upstream.call, []

    def first_only(**kwargs):
        calls.append(kwargs["endpoint"].provider_slug)
        if len(calls) == 1:
            return real(**kwargs)
        raise UpstreamError(error_type=ErrorType.PROVIDER_OVERLOADED, message="Overloaded", retryable=True, status=503)

    monkeypatch.setattr(upstream, "call", first_only)
    script = {"tool_call": "gateway_datetime,", "input_tokens": 100, "output_tokens": 10}
    response = ask(alice.client(), script, tools=[{"type": "gateway:datetime"}], provider={"only": ["standin-chat"]})
    assert response.status_code == 503, response.content
    assert response.json()["error"]["message"] == "Overloaded"
    (generation,) = Generation.objects.filter(account_id=alice.account_id)
    assert generation.cost == (Decimal(100) * Decimal("0.5") + Decimal(10) * Decimal("1.5")) / Decimal(1_000_000)
    assert len(generation.provider_responses) == 2  # the first round's attempt and the failed one


def test_the_answer_sent_back_with_its_server_tool_items_is_accepted(alice, standin_catalog):
    first = ask(alice.client(), {"tool_call": "gateway_datetime,"}, tools=[{"type": "gateway:datetime"}]).json()
    follow_up = first["output"] + [{"role": "user", "content": "And tomorrow?"}]
    response = alice.client().post(
        "/api/v1/responses",
        {"model": "standin/echo", "input": follow_up, "tools": [{"type": "gateway:datetime"}]},
        format="json",
    )
    assert response.status_code == 200, response.content
