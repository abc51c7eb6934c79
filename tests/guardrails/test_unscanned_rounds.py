"""The last texts that reached a model unscanned (issue 28, item 4 follow-up): what the server tools the gateway runs
hand the model in later rounds (a fetched page, search results, the tools tool_search finds), a file the guardrails
cannot read that a router's panel would read before the file-parser, and the free text of a hosted tool's definition.
Also the scanned-bytes budget counts what is scanned: a run of text parts twice (joined and part by part), and a
text with look-alike letters once per view."""

import base64
import json
from decimal import Decimal
from typing import Any

import pytest

from routing.standin.search import PDF
from tests.guardrails.test_enforcement import BLOCK, ask, guardrail, upstream_calls
from tests.guardrails.test_unscanned_paths import refused, split_message
from tests.plugins.test_hosted_tools import hosted_catalog  # noqa: F401  # a fixture
from tests.plugins.test_web_plugin import searxng  # noqa: F401  # a fixture
from tests.support import assert_error_envelope, sse_events


def data_url(data: bytes, media: str) -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


MARKER: dict[str, Any] = {
    "content_filters": [{"pattern": "STANDIN-ARTICLE-TEXT", "action": "block", "label": "marker"}]
}
ARTICLE_WORDS: dict[str, Any] = {
    "content_filters": [{"pattern": "STANDIN-NOTES-TEXT", "action": "redact", "label": "notes"}]
}


def looped(persona, script: dict, *, tools: list, stream: bool = False):
    """A /responses request whose stand-in model calls the server tools `script` names, one per round."""
    directive = json.dumps({"chunks": 1, **script})
    return ask(persona, f"Hello <<standin {directive}>>", tools=tools, stream=stream)


def fetch(url: str) -> dict:
    return {"tool_call": "gateway_web_fetch,", "tool_arguments": json.dumps({"url": url})}


@pytest.fixture
def pages(settings, standin_catalog):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True  # the stand-in's pages are on loopback
    standin_catalog.clear()
    return standin_catalog


def test_a_fetched_page_is_scanned_before_the_next_round(alice, pages):
    guardrail(alice, **MARKER)
    response = looped(alice, fetch(f"{pages.url}/pages/article.html"), tools=[{"type": "gateway:web_fetch"}])
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["marker"]
    assert "STANDIN-ARTICLE-TEXT" not in response.content.decode()
    assert len(upstream_calls(pages)) == 1  # the first round only: the page never reached the model


def test_a_streamed_loop_ends_refused_when_a_fetched_page_is_blocked(alice, pages):
    guardrail(alice, **MARKER)
    response = looped(
        alice, fetch(f"{pages.url}/pages/article.html"), tools=[{"type": "gateway:web_fetch"}], stream=True
    )
    assert response.status_code == 200  # the stream had started: the refusal ends it in band
    events, raw = sse_events(response)
    (failed,) = [event for event in events if event["type"] == "response.failed"]
    assert "guardrail Team policy" in failed["response"]["error"]["message"], failed
    assert b"STANDIN-ARTICLE-TEXT" not in raw
    assert len(upstream_calls(pages)) == 1
    from gateway.billing.models import Generation

    (charged,) = Generation.objects.filter(account_id=alice.account_id, api_key__isnull=False)
    assert charged.status == "failed" and charged.cost > 0  # the round that ran is billed


def test_a_redaction_in_a_fetched_page_is_what_the_model_reads(alice, pages):
    guardrail(alice, **ARTICLE_WORDS)
    response = looped(alice, fetch(f"{pages.url}/pages/notes.txt"), tools=[{"type": "gateway:web_fetch"}])
    assert response.status_code == 200, response.content
    first, second = upstream_calls(pages)
    raw = json.dumps(second["body"])
    assert "STANDIN-NOTES-TEXT" not in raw and "[REDACTED:notes]" in raw


def test_web_search_results_are_scanned_before_the_next_round(alice, searxng):  # noqa: F811
    guardrail(alice, content_filters=[{"pattern": "Example News", "action": "block", "label": "news"}])
    script = {"tool_call": "gateway_web_search,", "tool_arguments": '{"query": "quantum sensors"}'}
    response = looped(alice, script, tools=[{"type": "gateway:web_search"}])
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["news"]
    assert len(upstream_calls(searxng)) == 1 and len(searxng.requests_for("/search")) == 1
    from gateway.billing.models import Generation

    (charged,) = Generation.objects.filter(account_id=alice.account_id, api_key__isnull=False)
    assert charged.cost >= Decimal("0.004")  # the first round and the search ran: charged with the refusal


def test_a_tool_that_tool_search_finds_is_scanned_before_it_is_declared(alice, standin_catalog):
    """A deferred tool's definition reaches the model first in tool_search's result, then declared in the next round."""
    guardrail(alice, **BLOCK)
    deferred = {
        "type": "function",
        "name": "lookup_order",
        "description": "Look up an order (ACME-1234 only)",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        "defer_loading": True,
    }
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    script = {"tool_call": "gateway_tool_search,lookup_order,", "tool_arguments": '{"query": "order"}'}
    response = looped(alice, script, tools=[{"type": "gateway:tool_search"}, weather, deferred])
    refused(response, "responses")
    assert len(upstream_calls(standin_catalog)) == 1  # the first round only: the found tool never reached the model


@pytest.mark.parametrize("field", ["server_description", "server_label"])
def test_a_hosted_tool_definition_is_scanned(alice, hosted_catalog, field):  # noqa: F811
    guardrail(alice, **BLOCK)
    mcp = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse"}
    mcp[field] = "ACME-1234" if field == "server_label" else "Documents of project ACME-1234"
    refused(ask(alice, "Hi", tools=[mcp], model="standin/search"), "responses")
    assert upstream_calls(hosted_catalog) == []


def test_a_redaction_in_a_hosted_tool_definition_refuses_the_request(alice, hosted_catalog):  # noqa: F811
    """A definition is configuration the provider acts on: changed by a redaction, it would be another tool."""
    guardrail(alice, content_filters=[{"pattern": "internal", "action": "redact", "label": "internal"}])
    mcp = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse"}
    mcp["server_description"] = "The internal documents"
    body = assert_error_envelope(ask(alice, "Hi", tools=[mcp], model="standin/search"), 403)
    assert body["error"]["metadata"]["patterns"] == ["internal"]
    assert upstream_calls(hosted_catalog) == []


def test_a_file_the_guardrails_cannot_read_never_reaches_a_routers_panel(alice, db, standin):
    """The fusion panel runs before the file-parser and the second pass: a PDF sent as it is would reach every panel
    member unscanned, so with content filters in force it is refused before any of them is called."""
    from tests.plugins.test_fusion import PANEL, fusion_catalog

    fusion_catalog(standin)
    guardrail(alice, **BLOCK)
    part = {"type": "input_file", "filename": "plan.pdf", "file_data": data_url(PDF, "application/pdf")}
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta", "tools": []}
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Summarise"}, part]}]
    response = ask(alice, items, model="gateway/fusion", plugins=[plugin])
    body = assert_error_envelope(response, 403)
    assert "plan.pdf" in body["error"]["message"]
    assert upstream_calls(standin) == []


def test_the_scan_budget_counts_a_run_of_text_parts_joined_and_part_by_part(alice, standin_catalog, settings):
    """Two parts of 30 bytes are scanned joined (60) and one by one (60): 120 bytes, over a 100-byte budget."""
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 100
    guardrail(alice, **BLOCK)
    body = assert_error_envelope(ask(alice, split_message("a" * 30, "b" * 30)), 413)
    assert body["error"]["metadata"]["bytes"] == 120
    assert upstream_calls(standin_catalog) == []


def test_the_scan_budget_counts_each_view_of_a_text_with_look_alike_letters(alice, standin_catalog, settings):
    """40 Cyrillic letters are 80 bytes, and their look-alike view (Latin letters) 40 more: 120, over 100."""
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 100
    guardrail(alice, **BLOCK)
    body = assert_error_envelope(ask(alice, "\u0410" * 40), 413)
    assert body["error"]["metadata"]["bytes"] == 120
    assert upstream_calls(standin_catalog) == []


def test_a_server_tool_result_over_the_scan_budget_is_refused_and_the_rounds_that_ran_are_billed(
    alice, pages, settings
):
    """A result the guardrails may not scan whole ends the loop as a block does: 413, nothing more upstream, the
    round that ran billed (the request's hold settled, not left open)."""
    from gateway.billing.models import Generation

    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 600  # the request's own text fits, the fetched article not
    guardrail(alice, **MARKER)
    response = looped(alice, fetch(f"{pages.url}/pages/article.html"), tools=[{"type": "gateway:web_fetch"}])
    body = assert_error_envelope(response, 413)
    assert "GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL" in body["error"]["message"]
    assert len(upstream_calls(pages)) == 1
    (charged,) = Generation.objects.filter(account_id=alice.account_id, api_key__isnull=False)
    assert charged.status != "in_progress" and charged.cost > 0  # settled: billed, the hold closed


def test_a_fusion_tool_result_is_scanned_before_the_model_reads_it(alice, db, standin):
    """gateway:fusion hands the model its panel's answers: a blocked word in one of them refuses the request before
    the caller's model reads them (the panel and the analyst ran, and are billed)."""
    from tests.plugins.test_fusion_tools import CALLER, catalog, sent_to
    from tests.plugins.test_fusion_tools import ask as ask_fusion

    catalog(standin)
    guardrail(alice, content_filters=[{"pattern": "Answer from beta", "action": "block", "label": "beta"}])
    standin.clear()
    response = ask_fusion(alice)
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["beta"]
    assert len(sent_to(standin, CALLER.split("/")[1])) == 1  # the caller's model: its first round only
