"""The `web` plugin's `native` engine: the provider's own web search passed through (OpenAI Responses `web_search`
tool, Anthropic's `web_search_20250305` server tool, Chat Completions `web_search_options`), its citations mapped to
url_citation annotations (flat Responses shape), its searches billed at the catalog's price and reported on the
generation record (`num_search_results`, `web_search_engine: native`). `engine` unset: native when an endpoint of
the model runs it as asked, else the operator's default engine; an explicit `native` nothing runs is a 400. All
against the stand-in provider on loopback (routing/standin/hosted.py emulates the providers' search)."""

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from gateway.billing.models import Generation
from routing.canonical import CanonicalRequest, HostedTool, Message, OutputHostedTool, OutputMessage, TextPart
from routing.providers.anthropic.request import build_body as anthropic_body
from routing.providers.anthropic.response import parse as anthropic_parse
from routing.providers.openai_chat.request import build_body as chat_body
from routing.providers.openai_responses.request import build_body as responses_body
from routing.standin.search import RESULTS
from tests.golden import FIXTURES, assert_golden
from tests.support import assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
CATALOG = Path(FIXTURES) / "web" / "hosted_catalog.yaml"
MODEL_PATHS = ("/chat/completions", "/responses", "/messages")
QUESTION = "What happened at the launch?"
TITLES = [title for _, title, _ in RESULTS]


@pytest.fixture
def hosted_catalog(standin_catalog):
    """The stand-in catalog plus standin/search (native search on the Responses and Anthropic wires)."""
    call_command("load_catalog", str(CATALOG), stdout=open("/dev/null", "w"))  # noqa: SIM115
    return standin_catalog


@pytest.fixture
def searxng(settings, hosted_catalog):
    """The operator's default engine: the stand-in's SearXNG-shaped engine."""
    settings.WEB_SEARCH_SEARXNG_URL = hosted_catalog.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    settings.WEB_SEARCH_PRICES = {"searxng": "0.004"}
    return hosted_catalog


def ask(persona, *, plugins, model="standin/search", provider=None, stream=False, text=QUESTION, **body):
    payload = {"model": model, "input": text, "plugins": plugins, "stream": stream, **body}
    if provider:
        payload["provider"] = {"only": [provider]}
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def model_calls(standin) -> list[dict]:
    return [call for path in MODEL_PATHS for call in standin.requests_for(path)]


def message_part(body: dict) -> dict:
    (message,) = [item for item in body["output"] if item["type"] == "message"]
    return message["content"][0]


def assert_cited(part: dict, titles: list[str]) -> None:
    """Each citation covers its source's title in the answer, in the flat Responses shape."""
    annotations = part["annotations"]
    assert [a["title"] for a in annotations] == titles
    for annotation in annotations:
        assert set(annotation) == {"type", "url", "title", "start_index", "end_index"}
        assert annotation["type"] == "url_citation"
        assert part["text"][annotation["start_index"] : annotation["end_index"]] == annotation["title"]


# ---- the wire formats (golden) -------------------------------------------------------------------------------

NATIVE_TOOL = {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}}
CANONICAL = CanonicalRequest(
    model="upstream-model",
    input=(Message(role="user", content=(TextPart(text=QUESTION),)),),
    hosted_tools=(HostedTool(spec=NATIVE_TOOL),),
)


def test_the_native_tool_in_each_wire_format():
    assert_golden("web/native_openai_responses_request.json", responses_body(CANONICAL))
    assert_golden("web/native_anthropic_request.json", anthropic_body(CANONICAL))
    plain = CanonicalRequest(model="m", input=CANONICAL.input, hosted_tools=(HostedTool(spec={"type": "web_search"}),))
    assert chat_body(plain)["web_search_options"] == {}


def test_anthropics_answer_becomes_a_search_call_and_citations():
    body = json.loads((FIXTURES / "web" / "native_anthropic_response.json").read_text())
    parsed = anthropic_parse(body)
    search, message = parsed.output
    assert isinstance(search, OutputHostedTool) and isinstance(message, OutputMessage)
    assert_golden(
        "web/native_anthropic_parsed.json",
        {"search": search, "text": message.text, "annotations": message.annotations, "usage": parsed.usage},
    )
    (cited,) = message.annotations
    assert message.text[cited["start_index"] : cited["end_index"]] == "the launch happened on February 1"
    assert parsed.usage.web_search_requests == 1


# ---- through the gateway -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "path"), [("standin-responses", "/responses"), ("standin-anthropic", "/messages")]
)
def test_native_search_is_passed_through_and_cited(alice, hosted_catalog, provider, path):
    response = ask(alice, plugins=[{"id": "web", "engine": "native"}], provider=provider)
    assert response.status_code == 200, response.content
    body = response.json()
    (call,) = hosted_catalog.requests_for(path)
    tools = call["body"]["tools"]
    if path == "/responses":
        assert tools == [{"type": "web_search"}]
        assert "web_search_call.action.sources" in call["body"]["include"]
    else:
        assert tools == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 10}]
    search, message = body["output"]
    assert search["type"] == "web_search_call" and search["status"] == "completed"
    assert search["action"]["query"] == QUESTION
    assert [s["url"] for s in search["action"]["sources"]] == [url for url, _, _ in RESULTS[:3]]
    assert_cited(message["content"][0], TITLES[:3])
    (entry,) = [e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "web" and e["type"] == "request_plugin"]
    assert entry["summary"] == "native search"


def test_native_search_is_billed_per_search_and_recorded(alice, hosted_catalog):
    plain = alice.client().post(
        "/api/v1/responses",
        {"model": "standin/search", "input": QUESTION, "provider": {"only": ["standin-anthropic"]}},
        format="json",
    )
    searched = ask(alice, plugins=[{"id": "web", "engine": "native"}], provider="standin-anthropic")
    assert plain.status_code == searched.status_code == 200
    cheap = Generation.objects.get(pk=plain["X-Generation-Id"])
    dear = Generation.objects.get(pk=searched["X-Generation-Id"])
    token_cost = (
        dear.tokens_input * 1 + dear.tokens_output * 2 - cheap.tokens_input - cheap.tokens_output * 2
    ) / Decimal(1_000_000)
    assert dear.cost - cheap.cost == Decimal("0.01") + token_cost  # one search at the endpoint's price
    assert dear.plugins["web"] == {"num_search_results": 3, "web_search_engine": "native"}


def test_domain_filters_reach_the_providers_search(alice, hosted_catalog):
    response = ask(alice, plugins=[{"id": "web", "engine": "native", "exclude_domains": ["example.com"]}])
    assert response.status_code == 200, response.content
    # only Anthropic's search blocks domains: the request went there, with the domain blocked
    assert hosted_catalog.requests_for("/responses") == []
    (call,) = hosted_catalog.requests_for("/messages")
    assert call["body"]["tools"][0]["blocked_domains"] == ["example.com"]
    urls = [s["url"] for s in response.json()["output"][0]["action"]["sources"]]
    assert urls and not any("example.com/" in url for url in urls)


def test_engine_unset_is_native_where_an_endpoint_runs_it_else_the_default_engine(alice, searxng):
    native = ask(alice, plugins=[{"id": "web"}])
    assert native.status_code == 200, native.content
    assert searxng.requests_for("/search") == []
    assert native.json()["output"][0]["type"] == "web_search_call"
    searxng.clear()
    default = ask(alice, plugins=[{"id": "web"}], model="standin/echo")
    assert default.status_code == 200, default.content
    assert len(searxng.requests_for("/search")) == 1
    assert [item["type"] for item in default.json()["output"]] == ["message"]
    searxng.clear()
    # an option only the gateway's engines have: the default engine searches
    engine_option = ask(alice, plugins=[{"id": "web", "max_results": 2}])
    assert engine_option.status_code == 200 and len(searxng.requests_for("/search")) == 1
    record = Generation.objects.get(pk=engine_option["X-Generation-Id"]).plugins["web"]
    assert record["web_search_engine"] == "searxng"


def test_the_online_suffix_searches_natively_too(alice, searxng):
    response = ask(alice, plugins=[], model="standin/search:online")
    assert response.status_code == 200, response.content
    assert response.json()["output"][0]["type"] == "web_search_call"
    assert searxng.requests_for("/search") == []


@pytest.mark.parametrize(
    ("plugin", "model", "message"),
    [
        ({"engine": "native"}, "standin/echo", "no endpoint of it runs web search natively"),
        ({"engine": "native", "max_results": 3}, "standin/search", "max_results apply to the gateway's search engines"),
        (
            {"engine": "native", "include_domains": ["*.example.com"]},
            "standin/search",
            "no endpoint runs it as given",
        ),
    ],
)
def test_native_that_cannot_run_as_asked_is_a_400(alice, hosted_catalog, plugin, model, message):
    body = assert_error_envelope(ask(alice, plugins=[{"id": "web", **plugin}], model=model), 400)
    assert "web search engine 'native'" in body["error"]["message"]
    assert message in body["error"]["message"]
    assert model_calls(hosted_catalog) == []


@pytest.mark.parametrize(
    ("provider", "path"), [("standin-responses", "/responses"), ("standin-anthropic", "/messages")]
)
def test_a_streamed_native_search_has_its_call_and_citations(alice, hosted_catalog, provider, path):
    response = ask(alice, plugins=[{"id": "web", "engine": "native"}], provider=provider, stream=True)
    assert response.status_code == 200
    events, _ = sse_events(response)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    assert types[start : start + 5] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["web_search_call", "message"]
    assert_cited(message_part(final), TITLES[:3])
    assert Generation.objects.get(pk=response["X-Generation-Id"]).plugins["web"]["num_search_results"] == 3


def test_a_chat_completions_search_model_through_web_search_options(alice, hosted_catalog):
    response = ask(alice, plugins=[{"id": "web", "engine": "native"}], model="standin/search-preview")
    assert response.status_code == 200, response.content
    (call,) = hosted_catalog.requests_for("/chat/completions")
    assert call["body"]["web_search_options"] == {}
    assert_cited(message_part(response.json()), TITLES[:3])
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert generation.plugins["web"] == {"num_search_results": 3, "web_search_engine": "native"}
