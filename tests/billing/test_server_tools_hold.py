"""What the server tools cost by themselves is covered before it is spent: the gateway:web_search calls a request may
make (the loop's calls, the tool's max_uses at most) at the engine's price are in the hold (an account that can pay
the rounds but not the searches is a 402 before any call), and a gateway:fusion run is checked against the balance
less what the request's earlier runs spent (a model calling gateway_fusion again and again cannot spend past the
balance, which the settlement would then cap: credits lost). Through the stand-in, on PostgreSQL."""

import json
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from plugins.fusion.costs import worst_cost
from plugins.fusion.panel import member_plan, panel_settings
from routing.canonical import CanonicalRequest, Message, TextPart
from tests.billing.books import assert_books
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import Persona, assert_error_envelope

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
SEARCH_PRICE = Decimal("0.05")


def persona(credits: str) -> Persona:
    return Persona(account_provision(name="pat", plan="payg", credits=Decimal(credits)))


def loop_request(who: Persona, script: dict, tools: list, **body):
    directive = json.dumps({"chunks": 1, **script})
    payload = {"model": "standin/echo", "input": f"Hello <<standin {directive}>>", "tools": tools, **body}
    return who.client().post("/api/v1/responses", payload, format="json", **METADATA)


@pytest.fixture
def searxng(settings, standin_catalog):
    settings.WEB_SEARCH_SEARXNG_URL = standin_catalog.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    settings.WEB_SEARCH_DEFAULT_ENGINE = "searxng"
    settings.WEB_SEARCH_PRICES = {"searxng": str(SEARCH_PRICE)}
    standin_catalog.clear()
    return standin_catalog


def test_the_searches_a_loop_may_make_are_held(searxng):
    search = {"type": "gateway:web_search"}
    limited_tool = {**search, "parameters": {"max_uses": 5}}
    probe = persona("100")
    held = {
        name: Generation.objects.get(pk=loop_request(probe, {}, [tool])["X-Generation-Id"]).held
        for name, tool in (("all", search), ("limited", limited_tool))
    }
    assert held["all"] - held["limited"] == 25 * SEARCH_PRICE  # 30 searches held, or 5
    searxng.clear()
    pat = persona(str(held["limited"] + SEARCH_PRICE))  # the rounds' tokens and 5 searches fit; 30 do not
    refused = loop_request(pat, {}, [search])
    assert_error_envelope(refused, 402)
    assert searxng.requests_for("/search") == [] and searxng.requests_for("/chat/completions") == []
    # fewer searches: max_uses, or fewer calls
    limited = loop_request(pat, {}, [limited_tool])
    assert limited.status_code == 200, limited.content
    fewer = loop_request(pat, {}, [search], max_tool_calls=5)
    assert fewer.status_code == 200, fewer.content
    account = assert_books(pat.account_id)
    assert account.reserved == 0


def test_searches_made_are_charged_exactly(searxng):
    pat = persona("5")
    script = {"tool_call": "gateway_web_search,gateway_web_search,", "tool_arguments": '{"query": "q"}'}
    response = loop_request(pat, script, [{"type": "gateway:web_search"}], provider={"only": ["standin-chat"]})
    assert response.status_code == 200, response.content
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    tokens = (record.tokens_input * Decimal("0.5") + record.tokens_output * Decimal("1.5")) / Decimal(1_000_000)
    assert record.cost == tokens + 2 * SEARCH_PRICE
    assert assert_books(pat.account_id).balance == Decimal(5) - record.cost


PANEL = ["acme/alpha", "acme/beta", "bolt/gamma"]
TOKENS = 2000  # what each panel member and the analyst report: their whole output limit (the worst case)


def fusion_worst(parameters: dict) -> Decimal:
    """What one gateway:fusion run's credit check assumes (plugins.fusion.tool.fusion_tool_run)."""
    panel = panel_settings(parameters, analyst="corp/epsilon")
    assert not isinstance(panel, str)
    request = CanonicalRequest(
        model="",
        input=(Message(role="user", content=(TextPart("Name a cat"),)),),
        max_output_tokens=parameters["max_completion_tokens"],
    )
    plans = {model: member_plan(model, ()) for model in (*panel.models, panel.analyst)}
    return worst_cost(request, [plans[m] for m in panel.models], plans[panel.analyst], panel=panel, final_answer=False)


def entry_cost(body: dict) -> float:
    return next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "gateway:fusion")["cost_usd"]


def fusion_twice(who: Persona, parameters: dict):
    script = json.dumps(
        {"tool_call": "gateway_fusion,gateway_fusion,", "tool_arguments": json.dumps({"prompt": "Name a cat"})}
    )
    payload = {
        "model": "corp/epsilon",
        "input": f"Help me name my cat <<standin {script}>>",
        "tools": [{"type": "gateway:fusion", "parameters": parameters}],
        "max_output_tokens": 50,
    }
    return who.client().post("/api/v1/responses", payload, format="json", **METADATA)


def test_a_model_calling_fusion_again_cannot_spend_past_the_balance(db, standin):
    scripts = {model: f"text=Answer from {model.split('/')[1]},output_tokens={TOKENS}" for model in PANEL}
    scripts["bolt/delta"] = f'text={{"consensus":["short"]}},output_tokens={TOKENS}'
    routers_catalog(standin, scripts=scripts)
    parameters = {"analysis_models": PANEL, "model": "bolt/delta", "tools": [], "max_completion_tokens": TOKENS}
    worst = fusion_worst(parameters)
    # given: the request's hold plus 1.2 times one run's worst case: one run fits, a second does not (a run spends
    # more than half its worst case here: every call reports its whole output limit)
    probe = persona("100")
    held = Generation.objects.get(pk=fusion_twice(probe, parameters)["X-Generation-Id"]).held
    pat = persona(str(held + worst * Decimal("1.2")))
    # when: the model calls gateway_fusion twice
    response = fusion_twice(pat, parameters)
    # then: the first run ran, the second was refused before any member was asked
    assert response.status_code == 200, response.content
    first, second = [item for item in response.json()["output"] if item["type"] == "gateway:fusion"]
    assert first["status"] == "completed"
    spent = Decimal(str(entry_cost(response.json())))
    assert spent > worst * Decimal("0.2")  # the first run's spend leaves less than a worst case
    assert second["status"] == "failed" and second["failure_reason"] == "insufficient_credits"
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    account = assert_books(pat.account_id)
    assert account.balance == held + worst * Decimal("1.2") - record.cost and account.balance >= 0
    assert record.usage_anomaly is None
