"""Tools the provider runs itself (web_search, code_interpreter, image_generation, mcp, file_search) in `tools`: passed
through to the endpoints whose catalog entry lists them (and whose adapter can send them as given), never to the
others, never dropped; a tool no endpoint of the model runs is a 400 naming it. The provider's output items come back
in the output (JSON and SSE, with their progress events), and the official openai SDK parses both (live gateway).
The stand-in emulates the providers (routing/standin/hosted.py); tests/fixtures/web/hosted_catalog.yaml says which
stand-in endpoints run which tools."""

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from openai import OpenAI
from openrouter import OpenRouter

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.models import Endpoint
from routing.providers.hosted import MAX_TOOL_BYTES
from routing.services import CatalogError, catalog_load
from tests.golden import FIXTURES
from tests.support import Persona, assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
CATALOG = Path(FIXTURES) / "web" / "hosted_catalog.yaml"
MODEL_PATHS = ("/chat/completions", "/responses", "/messages")
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}
IMAGE = {"type": "image_generation", "size": "1024x1024"}
MCP = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse", "require_approval": "never"}
WEB = {"type": "web_search", "search_context_size": "low"}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def load_hosted_catalog() -> None:
    call_command("load_catalog", str(CATALOG), stdout=open("/dev/null", "w"))  # noqa: SIM115


@pytest.fixture
def hosted_catalog(standin_catalog):
    load_hosted_catalog()
    return standin_catalog


def ask(persona, tools, *, model="standin/search", stream=False, **body):
    payload = {"model": model, "input": "Plot the launch figures", "tools": tools, "stream": stream, **body}
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def model_calls(standin) -> list[dict]:
    return [call for path in MODEL_PATHS for call in standin.requests_for(path)]


def test_hosted_tools_go_only_to_the_endpoint_that_runs_them(alice, hosted_catalog):
    response = ask(alice, [WEATHER, CODE, IMAGE, MCP, WEB])
    assert response.status_code == 200, response.content
    (call,) = model_calls(hosted_catalog)  # the Responses endpoint: the only one that runs them all
    assert call["path"].endswith("/responses")
    assert call["body"]["tools"][1:] == [CODE, IMAGE, MCP, WEB]  # as the caller gave them
    assert call["body"]["tools"][0]["name"] == "get_weather"
    body = response.json()
    assert [item["type"] for item in body["output"]] == [
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "web_search_call",
        "message",
    ]
    code = body["output"][0]
    assert code["code"] == "print(6 * 7)" and code["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert body["output"][2]["server_label"] == "docs"
    (entry,) = [e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "hosted-tools"]
    assert entry["data"] == {"tools": ["code_interpreter", "image_generation", "mcp", "web_search"], "endpoints": 1}


def test_web_search_alone_may_go_to_either_endpoint_that_runs_it(alice, hosted_catalog):
    for provider, path in (("standin-responses", "/responses"), ("standin-anthropic", "/messages")):
        hosted_catalog.clear()
        tool = {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}}
        response = ask(alice, [tool], provider={"only": [provider]})
        assert response.status_code == 200, response.content
        (call,) = model_calls(hosted_catalog)
        assert call["path"].endswith(path)
        search = response.json()["output"][0]
        assert search["type"] == "web_search_call"
        assert search["action"]["sources"] and all("example.com/" in s["url"] for s in search["action"]["sources"])


@pytest.mark.parametrize(
    ("tools", "model", "named"),
    [
        ([CODE], "standin/echo", "tools[0]: the tool type 'code_interpreter' is not available on this gateway"),
        ([WEATHER, MCP], "standin/echo", "tools[1]: the tool type 'mcp' is not available on this gateway"),
        ([{"type": "file_search", "vector_store_ids": ["vs_1"]}], "standin/search-preview", "'file_search'"),
        ([{"type": "gateway:image_generation"}], "standin/search", "'gateway:image_generation' is not available"),
        ([{"type": "computer_use_preview"}], "standin/search", "'computer_use_preview' is not available"),
    ],
)
def test_a_tool_no_endpoint_runs_is_a_400_naming_it(alice, hosted_catalog, tools, model, named):
    body = assert_error_envelope(ask(alice, tools, model=model), 400)
    assert named in body["error"]["message"]
    assert model_calls(hosted_catalog) == []


def test_a_tool_no_endpoint_runs_as_given_says_why(alice, hosted_catalog):
    # Anthropic's search blocks domains but has no context size; OpenAI's has no blocked domains
    tool = {"type": "web_search", "search_context_size": "low", "filters": {"blocked_domains": ["example.com"]}}
    body = assert_error_envelope(ask(alice, [tool]), 400)
    message = body["error"]["message"]
    assert "tools[0]: the tool type 'web_search'" in message and "no endpoint runs it as given" in message
    assert model_calls(hosted_catalog) == []


def test_a_provider_preference_that_leaves_no_capable_endpoint_is_a_400(alice, hosted_catalog):
    response = ask(alice, [CODE], provider={"only": ["standin-anthropic"]})
    assert response.status_code in (400, 404), response.content
    assert model_calls(hosted_catalog) == []


def test_an_oversized_tool_definition_is_a_400(alice, hosted_catalog):
    huge = {**MCP, "allowed_tools": ["t" * 100] * (MAX_TOOL_BYTES // 100)}
    body = assert_error_envelope(ask(alice, [huge]), 400)
    assert body["error"]["message"].startswith("tools[0]: the mcp tool's definition is longer than")


def test_streamed_hosted_calls_have_their_progress_events(alice, hosted_catalog):
    response = ask(alice, [CODE, WEB], stream=True)
    assert response.status_code == 200
    events, _ = sse_events(response)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    assert types[start : start + 9] == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"], e["item"]["status"]) for e in added] == [
        (0, "code_interpreter_call", "in_progress"),
        (1, "web_search_call", "in_progress"),
        (2, "message", "in_progress"),
    ]
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["code_interpreter_call", "web_search_call", "message"]
    annotations = final["output"][2]["content"][0]["annotations"]
    assert [a["type"] for a in annotations] == ["url_citation"] * 3


def test_the_providers_searches_are_billed_at_the_catalogs_price(alice, hosted_catalog):
    plain = ask(alice, [], provider={"only": ["standin-responses"]}, input="Same")
    searched = ask(alice, [WEB], provider={"only": ["standin-responses"]}, input="Same")
    assert plain.status_code == searched.status_code == 200
    cheap = Generation.objects.get(pk=plain["X-Generation-Id"])
    dear = Generation.objects.get(pk=searched["X-Generation-Id"])
    tokens = Decimal(dear.tokens_input - cheap.tokens_input + 2 * (dear.tokens_output - cheap.tokens_output))
    assert dear.cost - cheap.cost == Decimal("0.01") + tokens / 1_000_000


# ---- the openai SDK, live --------------------------------------------------------------------------------------


@pytest.fixture
def dana(transactional_db, standin_catalog):
    load_hosted_catalog()
    return Persona(account_provision(name="dana", plan="payg", credits=Decimal("5")))


@pytest.mark.live
def test_the_openai_sdk_parses_hosted_calls_json_and_stream(live_gateway, dana):
    client = OpenAI(base_url=live_gateway.api, api_key=dana.api_key, max_retries=0, timeout=20)
    tools = [CODE, IMAGE, WEB]
    response = client.responses.create(model="standin/search", input="Plot it", tools=tools)
    assert [type(item).__name__ for item in response.output] == [
        "ResponseCodeInterpreterToolCall",
        "ImageGenerationCall",
        "ResponseFunctionWebSearch",
        "ResponseOutputMessage",
    ]
    cited = response.output[-1].content[0].annotations
    assert [type(a).__name__ for a in cited] == ["AnnotationURLCitation"] * 3
    assert response.output_text.startswith("Hello from the local stand-in provider. Sources: ")
    events = list(client.responses.create(model="standin/search", input="Plot it", tools=tools, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert (
        "response.code_interpreter_call.interpreting" in kinds and "response.image_generation_call.generating" in kinds
    )
    final = events[-1].response
    assert [item.type for item in final.output] == [
        "code_interpreter_call",
        "image_generation_call",
        "web_search_call",
        "message",
    ]
    with client.responses.stream(model="standin/search", input="Plot it", tools=tools) as stream:
        streamed = stream.get_final_response()
    assert streamed.output_text == response.output_text
    assert json.loads(streamed.model_dump_json())["output"][2]["action"]["type"] == "search"


def test_a_previous_answers_hosted_calls_sent_back_continue_the_conversation(alice, hosted_catalog):
    first = ask(alice, [CODE, WEB])
    assert first.status_code == 200, first.content
    history = [*first.json()["output"], {"role": "user", "content": "And the year before?"}]
    second = ask(alice, [CODE, WEB], input=history)
    assert second.status_code == 200, second.content
    sent = model_calls(hosted_catalog)[-1]["body"]["input"]
    assert [item.get("type") for item in sent] == ["message", "message"]  # the calls are records, not turns


# ---- Chat Completions: web_search_options -----------------------------------------------------------------------


def chat(persona, model, **body):
    payload = {"model": model, "messages": [{"role": "user", "content": "What happened at the launch?"}], **body}
    return persona.client().post("/api/v1/chat/completions", payload, format="json")


def test_chat_web_search_options_run_the_providers_search(alice, hosted_catalog):
    options = {"search_context_size": "low", "user_location": {"type": "approximate", "approximate": {"country": "FR"}}}
    response = chat(alice, "standin/search-preview", web_search_options=options)
    assert response.status_code == 200, response.content
    (call,) = model_calls(hosted_catalog)
    assert call["body"]["web_search_options"] == {
        "search_context_size": "low",
        "user_location": {"type": "approximate", "approximate": {"country": "FR"}},
    }
    message = response.json()["choices"][0]["message"]
    citations = message["annotations"]
    assert [c["type"] for c in citations] == ["url_citation"] * 3
    for citation in citations:
        cited = citation["url_citation"]
        assert message["content"][cited["start_index"] : cited["end_index"]] == cited["title"]


def test_chat_web_search_options_on_a_model_that_cannot_search_is_a_400(alice, hosted_catalog):
    body = assert_error_envelope(chat(alice, "standin/echo", web_search_options={}), 400)
    assert "'web_search' is not available on this gateway for standin/echo" in body["error"]["message"]
    assert model_calls(hosted_catalog) == []


def test_anthropics_search_streamed_live_has_its_call_and_citations(alice, hosted_catalog):
    # no post-stage wants this answer: its events are relayed as Anthropic's stream arrives
    tool = {"type": "web_search", "filters": {"blocked_domains": ["wikipedia.org"]}}
    response = ask(alice, [tool], stream=True, provider={"only": ["standin-anthropic"]})
    assert response.status_code == 200
    events, _ = sse_events(response)
    (call,) = model_calls(hosted_catalog)
    assert call["body"]["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 10, "blocked_domains": ["wikipedia.org"]}
    ]
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["web_search_call", "message"]
    assert final["output"][0]["action"]["query"] == "Plot the launch figures"
    part = final["output"][1]["content"][0]
    assert [a["title"] for a in part["annotations"]] == [
        "Example Docs: Introduction",
        "Example blog: the launch",
        "Example News: story 42",
    ]
    for annotation in part["annotations"]:
        assert part["text"][annotation["start_index"] : annotation["end_index"]] == annotation["title"]
    (done,) = [e for e in events if e["type"] == "response.content_part.done"]
    assert done["part"]["annotations"] == part["annotations"]


@pytest.mark.parametrize(
    ("choice", "provider", "sent"),
    [
        ({"type": "web_search"}, "standin-responses", {"type": "web_search"}),
        ({"type": "web_search"}, "standin-anthropic", {"type": "tool", "name": "web_search"}),
        ("required", "standin-responses", "required"),
        ("required", "standin-anthropic", {"type": "any"}),
    ],
)
def test_a_tool_choice_among_hosted_tools_reaches_the_provider(alice, hosted_catalog, choice, provider, sent):
    response = ask(alice, [{"type": "web_search"}], tool_choice=choice, provider={"only": [provider]})
    assert response.status_code == 200, response.content
    (call,) = model_calls(hosted_catalog)
    assert call["body"]["tool_choice"] == sent


def test_a_tool_choice_naming_a_hosted_tool_not_in_tools_is_a_400(alice, hosted_catalog):
    body = assert_error_envelope(ask(alice, [WEB], tool_choice={"type": "code_interpreter"}), 400)
    assert body["error"]["message"] == "tool_choice: the tool type 'code_interpreter' is not among the request's tools"
    assert model_calls(hosted_catalog) == []


def test_tool_choice_none_sends_no_hosted_tool(alice, hosted_catalog):
    response = ask(alice, [CODE], tool_choice="none", model="standin/echo")  # echo runs none: none is needed
    assert response.status_code == 200, response.content
    (call,) = model_calls(hosted_catalog)
    assert "tools" not in call["body"]


def test_the_catalog_shows_each_endpoints_search_price(alice, hosted_catalog):
    response = alice.client().get("/api/v1/models/standin/search/endpoints")
    assert response.status_code == 200, response.content
    prices = {e["provider_name"]: e["pricing"]["web_search"] for e in response.json()["data"]["endpoints"]}
    assert sorted(prices.values()) == ["0", "0.01", "0.01"]


@pytest.mark.live
def test_the_openrouter_sdk_parses_hosted_calls_streamed(live_gateway, dana):
    with OpenRouter(api_key=dana.api_key, server_url=live_gateway.api) as client:
        response = client.responses.send(model="standin/search", input="Plot it", tools=[CODE, IMAGE, WEB], stream=True)
        with response as event_stream:
            events = list(event_stream)
    assert not [e for e in events if type(e).__name__.startswith("Unknown")], "every event parsed as a known type"
    final = events[-1].response
    assert final.status == "completed"
    assert [item.type for item in final.output] == [
        "code_interpreter_call",
        "image_generation_call",
        "web_search_call",
        "message",
    ]


@pytest.mark.parametrize(
    ("provider", "tools", "message"),
    [
        ("standin-anthropic", ["code_interpreter"], "the anthropic adapter cannot pass code_interpreter through"),
        ("standin-responses", ["bash"], "hosted_tools must be a list of web_search, code_interpreter"),
    ],
)
def test_the_catalog_refuses_hosted_tools_an_adapter_cannot_pass(hosted_catalog, provider, tools, message):
    endpoint = {"provider": provider, "upstream_model": "m", "pricing": {"prompt": 1, "completion": 1}}
    model = {
        "id": "acme/hosted",
        "name": "x",
        "context_length": 1000,
        "endpoints": [{**endpoint, "hosted_tools": tools}],
    }
    with pytest.raises(CatalogError, match=message):
        catalog_load(data={"models": [model]})


def test_the_default_catalog_declares_the_providers_web_search(db):
    call_command("load_catalog", stdout=open("/dev/null", "w"))  # noqa: SIM115
    # (filtered here: a JSON `contains` lookup is PostgreSQL's, and the suite also runs on SQLite)
    searching = [e for e in Endpoint.objects.select_related("provider") if "web_search" in e.hosted_tools]
    assert {e.provider.slug for e in searching} == {"openai", "anthropic"}
    assert {e.price_web_search for e in searching} == {Decimal("0.01")}
