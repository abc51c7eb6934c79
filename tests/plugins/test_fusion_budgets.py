"""Every model call the gateway makes for a request (a fusion panel's members and analyst, the gateway:fusion tool's
panel) is covered by a hold that checks the credits AND every guardrail budget before the call, and is billed at
most that call's own worst case (what was sent and its output limit). Before, the panel was held against the
credits only and ran before the request's own hold: with a tiny budget every concurrent fusion request ran its
panel, was refused with 403, and was charged for the panel anyway (past the budget); with a tiny balance the
panel's cost was written off (charged down to what the balance could still pay)."""

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.db.models import Sum

from gateway.accounts.models import Account
from gateway.billing.models import Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from routing.canonical import Usage
from routing.catalog import endpoint_info
from routing.models import Endpoint
from routing.pricing import usage_cost
from tests.billing.books import assert_books
from tests.guardrails.test_enforcement import guardrail
from tests.plugins.test_file_parser import annotating, ocr_model, text_only  # noqa: F401 (fixtures)
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import Persona

PANEL = ["acme/alpha", "acme/beta", "bolt/gamma"]
ANALYST = "bolt/delta"
CALLER = "corp/epsilon"  # the model that calls the gateway:fusion tool
INPUT_TOKENS, OUTPUT_TOKENS = 30, 20  # what every call reports (within every call's bounds: billed as reported)
MAX_OUTPUT = 64
BUDGET = Decimal("0.004")  # alice's guardrail: a few fusion runs' worth
BALANCE = Decimal("0.004")  # carol's whole balance
REQUESTS = 200
CONCURRENCY = 16  # threads in this process, each with its own database connection (the server allows 100)


def catalog(standin) -> None:
    usage = f"input_tokens={INPUT_TOKENS},output_tokens={OUTPUT_TOKENS}"
    scripts = {model: f"latency_ms=30,text=Answer from {model.split('/')[1]},{usage}" for model in PANEL}
    scripts[ANALYST] = f'text={{"consensus": ["short names win"]}},{usage}'
    scripts[CALLER] = usage
    routers_catalog(standin, scripts=scripts)


def fusion_slug(persona: Persona):
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": ANALYST, "tools": []}
    payload = {"model": "gateway/fusion", "input": "Name a cat", "max_output_tokens": MAX_OUTPUT, "plugins": [plugin]}
    return persona.client().post("/api/v1/responses", payload, format="json")


def fusion_tool(persona: Persona):
    script = json.dumps({"tool_call": "gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})})
    parameters = {"analysis_models": PANEL, "model": ANALYST, "tools": [], "max_completion_tokens": MAX_OUTPUT}
    payload = {
        "model": CALLER,
        "input": f"Help me name my cat <<standin {script}>>",
        "tools": [{"type": "gateway:fusion", "parameters": parameters}],
        "max_output_tokens": MAX_OUTPUT,
    }
    return persona.client().post("/api/v1/responses", payload, format="json")


def plain(persona: Persona):
    payload = {"model": ANALYST, "input": "Name a cat", "max_output_tokens": MAX_OUTPUT}
    return persona.client().post("/api/v1/responses", payload, format="json")


def list_price_of_every_call(standin) -> Decimal:
    """What every call the stand-in answered costs at its list price (usage as the stand-in reports it)."""
    endpoints = {e.upstream_model: endpoint_info(e) for e in Endpoint.objects.select_related("provider", "model").all()}
    calls = standin.requests_for("/chat/completions")
    assert len(calls) < standin.received.maxlen  # every call is still in the stand-in's record
    total = Decimal(0)
    for call in calls:
        usage = Usage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS)
        total += usage_cost(endpoint=endpoints[call["body"]["model"]], usage=usage)
    return total


def charged(persona: Persona) -> Decimal:
    charges = LedgerEntry.objects.filter(account_id=persona.account_id, kind="charge")
    return -(charges.aggregate(total=Sum("amount"))["total"] or Decimal(0))


@pytest.mark.skipif(
    "connections['default'].vendor != 'postgresql'", reason="concurrent holds and budgets need PostgreSQL"
)
def test_budgets_and_balances_hold_under_concurrent_fusion_requests(alice, transactional_db, standin):
    """Given alice with a tiny USD budget (a guardrail on her key) and carol with a tiny balance, when 200 mixed
    requests (the gateway/fusion slug, a model calling the gateway:fusion tool, a plain request) run 16 at a time,
    then alice's spend stays within her budget, carol's balance never goes negative, no hold is left open, and
    every call any model answered is charged in full (nothing written off)."""
    catalog(standin)
    guardrail(alice, limit_usd=float(BUDGET))
    carol = Persona(account_provision(name="carol", plan="payg", credits=BALANCE))
    kinds = (fusion_slug, fusion_tool, plain)
    statuses: list[int] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        try:
            response = kinds[index % 3](alice if index % 2 else carol)
            with lock:
                statuses.append(response.status_code)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
        list(pool.map(one, range(REQUESTS)))
    connections.close_all()

    assert set(statuses) <= {200, 402, 403}, statuses  # refused with the spec's codes, never a 500
    assert statuses.count(200) >= 2  # some ran: the budget and the balance were used, not refused outright
    assert not Generation.objects.filter(status="in_progress").exists()  # every hold settled or given back
    alice_account, carol_account = assert_books(alice.account_id), assert_books(carol.account_id)
    assert charged(alice) <= BUDGET
    assert carol_account.balance >= 0 and alice_account.balance >= 0
    # Nothing written off: every call a model answered for either account was charged, at its list price.
    assert charged(alice) + charged(carol) == pytest.approx(list_price_of_every_call(standin), abs=Decimal("1e-9"))
    assert Account.objects.get(pk=carol.account_id).reserved == 0


def test_a_member_reporting_absurd_usage_is_billed_at_most_its_calls_worst_case(alice, db, standin):
    """Given a panel member whose upstream reports a million input and output tokens for a one-line question,
    when the panel runs, then that member is billed as what was sent and its output limit (not the model's
    context), and the whole run costs no more than the hold taken for it before it ran."""
    from plugins.common.tool_loop import drain
    from plugins.fusion.costs import worst_cost
    from plugins.fusion.panel import Meter, Panel, member_plan, member_request, panel_settings
    from plugins.fusion.run import fuse
    from routing.canonical import CanonicalRequest, Message, TextPart
    from routing.side_calls import sent_tokens

    catalog(standin)
    hostile = "text=Answer,input_tokens=1000000,output_tokens=1000000"
    routers_catalog(standin, scripts={**{m: f"text=Answer from {m.split('/')[1]}" for m in PANEL}, PANEL[0]: hostile})
    panel = panel_settings({"analysis_models": PANEL, "model": ANALYST, "tools": []})
    assert isinstance(panel, Panel)
    question = CanonicalRequest(
        model="", input=(Message(role="user", content=(TextPart("Name a cat"),)),), max_output_tokens=MAX_OUTPUT
    )
    plans = {model: member_plan(model, ()) for model in (*panel.models, panel.analyst)}
    held = worst_cost(question, [plans[m] for m in panel.models], plans[ANALYST], panel=panel)

    fused = drain(fuse(question, panel, plans, Meter()))

    [member] = [answer for answer in fused.answers if answer.model == PANEL[0]]
    sent = sent_tokens(member_request(question, panel))
    assert member.status == "completed"
    assert (member.usage.input_tokens, member.usage.output_tokens) == (sent, MAX_OUTPUT)  # not 32,768 and 128
    endpoint = endpoint_info(Endpoint.objects.select_related("provider", "model").get(model_id=PANEL[0]))
    assert member.cost == usage_cost(endpoint=endpoint, usage=Usage(input_tokens=sent, output_tokens=MAX_OUTPUT))
    assert 0 < fused.cost <= held


def test_a_moderation_call_is_held_within_the_budget_before_it_runs(alice, standin_catalog, settings):
    """Given a budget smaller than a request's own hold (every request is refused with 403) but larger than a few
    moderation calls, when requests asking for moderation keep coming, then each engine call is held against the
    budget before it runs and charged out of that hold: the spend stops at the budget. Before, each request passed
    the "anything left?" check, ran the engine, was refused, and was charged for the engine past the budget."""
    from tests.guardrails.test_enforcement import one_request_costs, spent_and_held
    from tests.plugins.test_moderation import moderations_engine

    held, _ = one_request_costs(alice)
    moderations_engine(settings, standin_catalog)  # 0.0002 USD a call
    limit = min(held / 2, Decimal("0.0009"))  # not a whole number of calls: the last one would pass it
    guardrail(alice, limit_usd=float(limit))
    payload = {"model": "standin/echo", "input": "A pleasant question", "plugins": [{"id": "moderation"}]}

    statuses = [alice.client().post("/api/v1/responses", payload, format="json").status_code for _ in range(12)]

    assert set(statuses) == {403}
    assert 0 < spent_and_held(alice) <= limit
    assert len(standin_catalog.requests_for("/moderations")) == int(limit / Decimal("0.0002"))
    assert_books(alice.account_id)


def test_the_entity_model_is_held_within_the_budget_before_it_runs(alice, standin_catalog, settings):
    """Given a guardrail with a budget smaller than a request's own hold and a person-name check (the entity model:
    a paid call), when requests keep coming, then the entity model's call is held against the budget before it
    runs: the spend never passes the budget. Before, each request passed the "anything left?" check, ran the
    entity model, was refused, and was charged for the entity model past the budget."""
    from tests.guardrails.test_enforcement import one_request_costs, spent_and_held

    held, _ = one_request_costs(alice)
    settings.GUARDRAILS_ENTITY_MODEL = "standin/echo"
    original = standin_catalog.script
    standin_catalog.script = dataclasses.replace(original, text=json.dumps({"person-name": ["Jane Doe"]}))
    limit = Decimal("0.00025")  # a few entity calls (0.00007-0.0001 USD each), no request's own hold
    assert held > limit
    guardrail(alice, limit_usd=float(limit), content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    payload = {"model": "standin/echo", "input": "Please call Jane Doe about the order"}

    statuses = [alice.client().post("/api/v1/responses", payload, format="json").status_code for _ in range(8)]

    standin_catalog.script = original
    assert set(statuses) == {403}
    assert spent_and_held(alice) <= limit
    assert_books(alice.account_id)


def test_an_embeddings_request_refused_after_its_entity_check_charges_it_out_of_its_hold(
    alice, standin_catalog, settings
):
    """Given a guardrail with a person-name check that allows only the chat model (so /embeddings has no endpoint
    left), when an embeddings request is refused after the entity model ran, then the entity call is charged out of
    its hold and no hold is left open (before, the hold would stay reserved until the stale-hold sweep)."""
    settings.GUARDRAILS_ENTITY_MODEL = "standin/echo"
    original = standin_catalog.script
    standin_catalog.script = dataclasses.replace(original, text=json.dumps({"person-name": []}))
    builtins = [{"slug": "person-name", "action": "redact"}]
    guardrail(alice, content_filter_builtins=builtins, allowed_models=["standin/echo"])
    payload = {"model": "standin/embed", "input": "Please call Jane Doe"}

    response = alice.client().post("/api/v1/embeddings", payload, format="json")

    standin_catalog.script = original
    assert response.status_code == 403, response.content
    assert not Generation.objects.filter(status="in_progress").exists()
    [charged] = Generation.objects.filter(account_id=alice.account_id, error_type="blocked")
    assert charged.cost > 0  # the entity model's call
    assert_books(alice.account_id)


def test_an_ocr_call_is_held_within_the_budget_before_it_runs(alice, text_only, ocr_model):  # noqa: F811 (fixtures)
    """Given a budget smaller than a request's own hold and than an OCR call's worst case, when requests with a
    scanned PDF keep coming, then the OCR call is held against the budget before it runs, so it never runs: the
    spend stays within the budget. Before, each request ran the OCR engine, was refused, and was charged past it."""
    from tests.guardrails.test_enforcement import one_request_costs, spent_and_held
    from tests.plugins.test_file_parser import ask as ask_with_files
    from tests.plugins.test_file_parser import file_part, scanned_pdf

    held, _ = one_request_costs(alice)
    limit = Decimal("0.00025")  # a few OCR calls as the stand-in bills them, no request's own hold
    assert held > limit
    guardrail(alice, limit_usd=float(limit))
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    ocr_model.clear()

    statuses = [
        ask_with_files(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins).status_code
        for _ in range(8)
    ]

    assert set(statuses) == {403}
    assert spent_and_held(alice) <= limit
    assert not [call for call in ocr_model.requests_for("/chat/completions") if "OCR engine" in json.dumps(call)]
    assert_books(alice.account_id)


def test_a_web_search_is_held_within_the_budget_before_it_runs(alice, standin_catalog, settings):
    """Given a budget smaller than a request's own hold but holding a few searches, when requests with the web
    plugin keep coming, then each search is held against the budget before it runs: the spend stops at the
    budget. Before, each request searched, was refused, and was charged for the search past the budget."""
    from tests.guardrails.test_enforcement import one_request_costs, spent_and_held

    held, _ = one_request_costs(alice)
    for engine in ("EXA", "TAVILY", "BRAVE"):
        setattr(settings, f"WEB_SEARCH_{engine}_API_KEY", "")
    settings.WEB_SEARCH_SEARXNG_URL = standin_catalog.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    settings.WEB_SEARCH_PRICES = {"searxng": "0.0002"}
    limit = Decimal("0.0009")  # four searches and a part: a fifth would pass it
    assert held > limit
    guardrail(alice, limit_usd=float(limit))
    payload = {"model": "standin/echo", "input": "What is new in Rust?", "plugins": [{"id": "web"}]}
    standin_catalog.clear()

    statuses = [alice.client().post("/api/v1/responses", payload, format="json").status_code for _ in range(8)]

    assert set(statuses) == {403}
    assert spent_and_held(alice) <= limit
    assert len(standin_catalog.requests_for("/search")) == 4
    assert_books(alice.account_id)


@pytest.mark.parametrize("broken", ["run.analysis_parse", "panel.Fused.data"])
def test_a_fusion_panel_that_fails_unexpectedly_is_charged_what_it_spent(alice, db, standin, monkeypatch, broken):
    """Given a fusion run whose panel and analyst answered, when the stage then fails unexpectedly (a bug: the
    analysis' parser raises, within the run; or the pipeline entry's data, once it ran), then the request fails,
    what the calls that ran cost is charged out of the panel's hold (each at its list price, as reported: within
    its bounds) and the rest of the hold is given back. Before, the whole hold was given back (or, after the run,
    left open until the stale-hold sweep) and the calls that ran were written off."""
    from plugins.fusion import panel, run

    catalog(standin)

    def bug(*args, **kwargs):
        raise RuntimeError("a bug")

    path, _, name = broken.rpartition(".")
    module, _, owner = path.partition(".")
    where = {"run": run, "panel": panel}[module]
    monkeypatch.setattr(getattr(where, owner) if owner else where, name, bug)
    client = alice.client()
    client.raise_request_exception = False
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": ANALYST, "tools": []}
    payload = {"model": "gateway/fusion", "input": "Name a cat", "max_output_tokens": MAX_OUTPUT, "plugins": [plugin]}

    response = client.post("/api/v1/responses", payload, format="json")

    assert response.status_code == 500
    assert len(standin.requests_for("/chat/completions")) == len(PANEL) + 1  # the members and the analyst ran
    assert charged(alice) == pytest.approx(list_price_of_every_call(standin), abs=Decimal("1e-9"))
    assert charged(alice) > 0
    assert not Generation.objects.filter(status="in_progress").exists()
    assert assert_books(alice.account_id).reserved == 0


def test_a_fusion_request_its_own_hold_cannot_follow_is_refused_before_the_panel_runs(db, standin):
    """Given carol, whose balance covers the panel, its analysis and a final answer reading 10,000 tokens, models
    that bill every call its worst case, and a gateway/fusion request of about 20,000 tokens (the final answer
    reads all of it: the request's own hold counts it), when she sends it, then she is refused with 402 before any
    panel member runs: nothing is charged, no hold stays open. Before, the panel's hold counted the final answer as
    reading the question's last 20,000 characters only: the panel ran, the request's own hold was refused (402),
    and the panel was charged."""
    from plugins.fusion.costs import worst_cost
    from plugins.fusion.panel import Panel, member_plan, panel_settings
    from routing.canonical import CanonicalRequest, Message, TextPart
    from routing.pricing import max_cost

    absurd = "input_tokens=1000000,output_tokens=1000000"  # every call billed its worst case: what was sent
    scripts = {model: f"text=Answer from {model.split('/')[1]},{absurd}" for model in PANEL}
    routers_catalog(standin, scripts={**scripts, ANALYST: f'text={{"consensus": ["short names win"]}},{absurd}'})
    text = "Name a cat. " * 6_700  # about 80,000 characters: 20,000 tokens, within every model's context
    question = CanonicalRequest(
        model="", input=(Message(role="user", content=(TextPart(text),)),), max_output_tokens=MAX_OUTPUT
    )
    panel = panel_settings({"analysis_models": PANEL, "model": ANALYST, "tools": []})
    assert isinstance(panel, Panel)
    plans = {model: member_plan(model, ()) for model in (*panel.models, panel.analyst)}
    panel_and_analysis = worst_cost(
        question, [plans[m] for m in panel.models], plans[ANALYST], panel=panel, final_answer=False
    )
    analyst = endpoint_info(Endpoint.objects.select_related("provider", "model").get(model_id=ANALYST))
    balance = panel_and_analysis + max_cost(endpoint=analyst, input_tokens=10_000, max_output_tokens=MAX_OUTPUT)
    carol = Persona(account_provision(name="carol", plan="payg", credits=balance))
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": ANALYST, "tools": []}
    payload = {"model": "gateway/fusion", "input": text, "max_output_tokens": MAX_OUTPUT, "plugins": [plugin]}

    response = carol.client().post("/api/v1/responses", payload, format="json")

    assert response.status_code == 402, response.content
    assert standin.requests_for("/chat/completions") == []  # no panel member, no analyst ran
    assert charged(carol) == 0
    assert not Generation.objects.filter(status="in_progress").exists()
    assert assert_books(carol.account_id).reserved == 0


def test_the_final_answer_reads_no_more_than_the_panels_hold_counted_for_it(alice, db, standin):
    """Given panel members that answer 100 kB each while reporting 20 output tokens, when a gateway/fusion request
    asking for 64 output tokens runs, then the writer's prompt carries each answer cut at what 64 tokens can
    honestly hold, never more than the panel's hold counted for the final answer (writer_tokens: the
    estimate and the prompt it bounds cannot drift apart). The output bound (routing.output_bound) cuts such an
    answer at the same length already; the writer's prompt does not rely on it."""
    from plugins.fusion.costs import writer_tokens
    from plugins.fusion.panel import Panel, panel_settings
    from routing.canonical import CanonicalRequest, Message, TextPart
    from routing.side_calls import CHARS_PER_TOKEN

    flood = f"flood=100000,input_tokens={INPUT_TOKENS},output_tokens={OUTPUT_TOKENS}"
    analyst = f'text={{"consensus": ["short names win"]}},input_tokens={INPUT_TOKENS},output_tokens={OUTPUT_TOKENS}'
    routers_catalog(standin, scripts={**{model: flood for model in PANEL}, ANALYST: analyst})
    question = CanonicalRequest(
        model="", input=(Message(role="user", content=(TextPart("Name a cat"),)),), max_output_tokens=MAX_OUTPUT
    )
    panel = panel_settings({"analysis_models": PANEL, "model": ANALYST, "tools": []})
    assert isinstance(panel, Panel)

    response = fusion_slug(alice)

    assert response.status_code == 200, response.content
    final = standin.requests_for("/chat/completions")[-1]["body"]
    [instructions] = [m["content"] for m in final["messages"] if m["role"] in ("system", "developer")]
    assert len(instructions) > len(PANEL) * MAX_OUTPUT  # the answers are there...
    assert len(instructions) <= writer_tokens(question, panel) * CHARS_PER_TOKEN  # ...as far as held


def test_a_fusion_request_too_long_for_the_analyst_is_refused_before_the_panel_runs(alice, db, standin):
    """Given a gateway/fusion request of about 35,000 tokens, more than the analyst's context (32,768), when alice
    sends it, then it is refused as a plain request to the analyst would be (400, the input too long for every
    endpoint) before any panel member runs, and nothing is charged. Before, the panel ran, the request's own plan
    found no endpoint for the final answer, and the panel was charged for a refused request."""
    catalog(standin)
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": ANALYST, "tools": []}
    text = "Name a cat. " * 11_700  # about 140,000 characters
    payload = {"model": "gateway/fusion", "input": text, "max_output_tokens": MAX_OUTPUT, "plugins": [plugin]}

    response = alice.client().post("/api/v1/responses", payload, format="json")

    assert response.status_code == 400, response.content
    assert "context" in response.json()["error"]["message"]
    assert standin.requests_for("/chat/completions") == []
    assert charged(alice) == 0
    assert not Generation.objects.filter(status="in_progress").exists()
