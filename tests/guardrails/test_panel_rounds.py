"""A fusion panel member's own server tools (issue 28 item 4, last gap): what web_search / web_fetch hand a member
(or a gateway:fusion tool's member) in its next round is scanned by the caller's guardrails first, as the request's
own loop is. A block fails the whole request with the guardrail's 403 and nothing more is sent upstream (no member's
next round, no analysis, no final answer); a redaction is what the member reads; what ran is billed, no hold is
left open. Through HTTP, with the stand-in provider as the models and as the SearXNG engine."""

import json
from decimal import Decimal

from gateway.billing.models import Generation
from routing.standin.server import StandinServer
from tests.billing.books import assert_books
from tests.guardrails.test_enforcement import guardrail
from tests.plugins.test_fusion_tools import (  # noqa: F401  # searxng: a fixture
    METADATA,
    PANEL,
    SEARCH_ONCE,
    SEARCH_PRICE,
    catalog,
    searxng,
    sent_to,
)
from tests.plugins.test_fusion_tools import ask as ask_tool
from tests.support import assert_error_envelope, sse_events

NEWS = {"content_filters": [{"pattern": "Example News", "action": "block", "label": "news"}]}
DOCS = {"content_filters": [{"pattern": "Example Docs", "action": "redact", "label": "docs"}]}
ANALYST = "bolt/delta"
ENTITY_MODEL = "corp/epsilon"
# A member scripted by its endpoint (its prompt is the caller's model's question): it searches in every round.
SEARCHING = 'tool_call=gateway_web_search,tool_arguments={"query":"quantum"}'


def ask_panel(persona, *, stream: bool = False):
    """gateway/fusion, its members searching the web (the default with an engine configured), each scripted to
    search once."""
    payload = {
        "model": "gateway/fusion",
        "input": f"What is new in quantum sensors? <<standin {SEARCH_ONCE}>>",
        "plugins": [{"id": "fusion", "analysis_models": PANEL, "model": ANALYST}],
        "stream": stream,
    }
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def rounds_of(standin, model: str) -> int:
    return len(sent_to(standin, model.split("/")[1]))


def assert_billed_and_closed(persona) -> None:
    """What ran (the members' first rounds, their searches) is charged; no hold stays reserved."""
    assert not Generation.objects.filter(account_id=persona.account_id, status="in_progress").exists()
    charged = Generation.objects.filter(account_id=persona.account_id).exclude(status="in_progress")
    assert sum((g.cost for g in charged), Decimal(0)) > 0
    assert assert_books(persona.account_id).reserved == 0


def first_rounds_only(standin: StandinServer) -> list[int]:
    """The panel members' rounds when a blocked tool result stops the panel: at most one each (no member reads the
    results), and at least one member ran. The members run in parallel, so the block may stop one before its first
    call: how many ran is a race, that none got a second round is not."""
    rounds = [rounds_of(standin, model) for model in PANEL]
    assert set(rounds) <= {0, 1} and 1 in rounds, rounds
    return rounds


def test_a_blocked_search_result_in_a_panel_members_round_fails_the_whole_request(alice, db, standin, searxng):  # noqa: F811
    catalog(standin)
    guardrail(alice, **NEWS)
    response = ask_panel(alice)
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["news"]
    assert "Example News" not in response.content.decode()
    # the members that started ran their first round and searched; none read the results: no second round, no
    # analysis, no answer (members run in parallel: one the block stops before its first call runs none)
    rounds = first_rounds_only(standin)
    assert len(standin.requests_for("/search")) == sum(rounds)
    assert rounds_of(standin, ANALYST) == 0
    assert_billed_and_closed(alice)


def test_a_streamed_fusion_request_is_refused_before_its_stream_starts(alice, db, standin, searxng):  # noqa: F811
    """The panel runs before the answer starts: the refusal is the guardrail's 403, not a stream."""
    catalog(standin)
    guardrail(alice, **NEWS)
    response = ask_panel(alice, stream=True)
    assert_error_envelope(response, 403)
    assert rounds_of(standin, ANALYST) == 0
    assert_billed_and_closed(alice)


def test_a_redaction_in_a_search_result_is_what_the_panel_member_reads(alice, db, standin, searxng):  # noqa: F811
    catalog(standin)
    guardrail(alice, **DOCS)
    response = ask_panel(alice)
    assert response.status_code == 200, response.content
    for model in PANEL:
        first, second = sent_to(standin, model.split("/")[1])
        raw = json.dumps(second)
        assert "Example Docs" not in raw and "[REDACTED:docs]" in raw
        assert "docs.example.com/guide/intro" in raw  # the rest of the result is read as it was


def test_a_fusion_tools_member_reads_search_results_only_after_the_guardrails(alice, db, standin, searxng):  # noqa: F811
    """gateway:fusion called by the request's model: its panel members search; a blocked result fails the request."""
    catalog(standin, **{model: SEARCHING for model in PANEL})
    guardrail(alice, **NEWS)
    standin.clear()
    response = ask_tool(alice, {"tools": [{"type": "gateway:web_search"}], "max_tool_calls": 1})
    body = assert_error_envelope(response, 403)
    assert body["error"]["metadata"]["patterns"] == ["news"]
    assert "Example News" not in response.content.decode()
    first_rounds_only(standin)
    assert rounds_of(standin, ANALYST) == 0
    assert rounds_of(standin, "corp/epsilon") == 1  # the caller's model: its first round only
    assert_billed_and_closed(alice)


def test_the_entity_checks_of_panel_members_tool_results_are_held_and_charged(
    alice,
    transactional_db,
    standin,
    searxng,  # noqa: F811
    settings,
):
    """An entity model call a member's tool results need (item 1's rule: every paid call held) runs under its own
    hold, which the request's hold takes over: the request is charged every call the stand-in answered (the
    members' rounds, the entity checks, the analysis, the final answer) and every search, and nothing stays held.
    Transactional: the checks' holds are taken in the panel's threads, on connections of their own."""
    from tests.plugins.test_fusion_budgets import charged, list_price_of_every_call

    usage = "input_tokens=30,output_tokens=20"  # what every call reports: list_price_of_every_call's figures
    scripts = {model: f"text=Answer from {model.split('/')[1]},{usage}" for model in PANEL}
    catalog(standin, **scripts, **{ANALYST: f"text={{}},{usage}", ENTITY_MODEL: f'text={{"person-name":[]}},{usage}'})
    settings.GUARDRAILS_ENTITY_MODEL = ENTITY_MODEL
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    standin.clear()
    response = ask_panel(alice)
    assert response.status_code == 200, response.content
    checks = [call for call in sent_to(standin, ENTITY_MODEL.split("/")[1]) if "You find personal data" in str(call)]
    assert len(checks) >= 1 + len(PANEL)  # the caller's text, then each member's search results
    for model in PANEL:
        assert rounds_of(standin, model) == 2  # the member read its (checked) results
    entry = next(e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "fusion")
    assert entry["data"]["guardrail_checks_cost_usd"] > 0
    searches = len(standin.requests_for("/search")) * SEARCH_PRICE
    assert charged(alice) == list_price_of_every_call(standin) + searches
    assert_billed_and_closed(alice)


def test_a_streamed_request_whose_fusion_tools_member_reads_a_blocked_result_fails_in_band(
    alice,
    db,
    standin,
    searxng,  # noqa: F811
):
    """The caller's stream had started when its model called gateway:fusion: the refusal ends it in band."""
    catalog(standin, **{model: SEARCHING for model in PANEL})
    guardrail(alice, **NEWS)
    standin.clear()
    response = ask_tool(alice, {"tools": [{"type": "gateway:web_search"}], "max_tool_calls": 1}, stream=True)
    assert response.status_code == 200
    events, raw = sse_events(response)
    (failed,) = [event for event in events if event["type"] == "response.failed"]
    assert "guardrail Team policy" in failed["response"]["error"]["message"], failed
    assert b"Example News" not in raw
    first_rounds_only(standin)
    assert rounds_of(standin, ANALYST) == 0 and rounds_of(standin, "corp/epsilon") == 1
    assert_billed_and_closed(alice)


def test_an_entity_check_that_cannot_run_in_a_members_round_refuses_the_request_and_bills_what_ran(
    alice,
    transactional_db,
    standin,
    searxng,  # noqa: F811
    settings,
):
    """The entity model reads the caller's text (the directive there has it answer the JSON asked) but not a
    member's search results (its endpoint's script: no JSON): the results are not sent unchecked, the request is
    refused (503) with no member's next round and no analysis, and every call that ran, the checks' included, is
    charged out of the holds taken for them."""
    from tests.plugins.test_fusion_budgets import charged, list_price_of_every_call

    usage = "input_tokens=30,output_tokens=20"
    catalog(
        standin,
        **{model: usage for model in PANEL},
        **{ANALYST: usage, ENTITY_MODEL: f"text=Sure! No names here.,{usage}"},
    )
    settings.GUARDRAILS_ENTITY_MODEL = ENTITY_MODEL
    guardrail(alice, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    standin.clear()
    directive = json.dumps({**json.loads(SEARCH_ONCE), "text": '{"person-name": []}'})
    payload = {
        "model": "gateway/fusion",
        "input": f"What is new in quantum sensors? <<standin {directive}>>",
        "plugins": [{"id": "fusion", "analysis_models": PANEL, "model": ANALYST}],
    }
    response = alice.client().post("/api/v1/responses", payload, format="json", **METADATA)
    body = assert_error_envelope(response, 503)
    assert "not sent unchecked" in body["error"]["message"]
    first_rounds_only(standin)
    assert rounds_of(standin, ANALYST) == 0
    searches = len(standin.requests_for("/search")) * SEARCH_PRICE
    assert charged(alice) == list_price_of_every_call(standin) + searches
    assert_billed_and_closed(alice)
