"""Fusion planned for the caller, as its own request is: a panel member (or the analyst) whose provider has no
operator credential answers through the caller's BYOK key (the stand-in sees that key), billed as BYOK (the fee,
after the month's free allowance); an account without such a key gets that member reported failed, as before. The
same through the gateway:fusion server tool, and a budget counting BYOK holds such a member at its list price.
PostgreSQL: the panel's threads read the key and the holds over their own connections (transactional_db)."""

import threading
import time
from decimal import Decimal

import pytest
from django.db import connections

from gateway.accounts.models import Plan
from gateway.billing.fees import BYOK_FEE_RATE, BYOK_MONTHLY_ALLOWANCE
from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.models import Provider
from routing.services import provider_credential_set
from tests.byok.test_byok_routing import add_key
from tests.guardrails.test_enforcement import guardrail
from tests.plugins import test_fusion_tools
from tests.plugins.test_fusion import PANEL, fusion_catalog, fusion_entry, post
from tests.plugins.test_fusion_tools import price_of
from tests.plugins.test_routers_catalog import provider_slug
from tests.support import Persona

BYOK_ONLY = "bolt/gamma"  # its provider has no operator credential: only a caller's key serves it
CUSTOMER_KEY = "byok-gamma-of-alice"


@pytest.fixture
def carol(transactional_db) -> Persona:
    """Another funded account, without a BYOK key."""
    return Persona(account_provision(name="carol", plan="payg", credits=Decimal("10")))


def byok_only(persona) -> None:
    """The member's provider loses its operator credential; `persona` adds its own key for it."""
    provider_credential_set(provider=Provider.objects.get(slug=provider_slug(BYOK_ONLY)), plaintext=None)
    add_key(persona, provider_slug(BYOK_ONLY), CUSTOMER_KEY)


def credentials_for(standin, upstream_model: str) -> list[str]:
    return [r["credential"] for r in standin.requests_for("/chat/completions") if r["body"]["model"] == upstream_model]


def panel_of(response) -> dict[str, dict]:
    assert response.status_code == 200, response.content
    return {member["model"]: member for member in fusion_entry(response.json())["data"]["panel"]}


def test_a_member_only_the_callers_key_serves_answers_with_that_key(alice, carol, transactional_db, standin):
    fusion_catalog(standin)
    byok_only(alice)
    # The model requested directly: served with alice's key, billed as BYOK
    direct = alice.client().post("/api/v1/responses", {"model": BYOK_ONLY, "input": "Hi"}, format="json")
    assert direct.status_code == 200, direct.content
    assert direct.json()["usage"]["is_byok"] is True
    assert credentials_for(standin, "gamma") == [CUSTOMER_KEY]
    standin.clear()
    # The same model in alice's fusion panel: it answers, with her key
    panel = panel_of(post(alice))
    assert all(member["status"] == "completed" for member in panel.values()), panel
    assert credentials_for(standin, "gamma") == [CUSTOMER_KEY]
    assert panel[BYOK_ONLY]["is_byok"] is True and "is_byok" not in panel["acme/alpha"]
    # billed as BYOK: within the month's free allowance its fee is 0; the others at their list price
    assert panel[BYOK_ONLY]["cost_usd"] == 0 and panel[BYOK_ONLY]["tokens"]["output"] > 0
    assert panel["acme/alpha"]["cost_usd"] > 0
    standin.clear()
    # Another account without a key for it: the member is reported failed (no credentials), the run goes on
    panel = panel_of(post(carol))
    assert panel[BYOK_ONLY]["status"] == "failed" and "credentials" in panel[BYOK_ONLY]["error"]
    assert panel["acme/alpha"]["status"] == "completed"
    assert credentials_for(standin, "gamma") == []  # never sent, with nobody's key


def test_a_byok_member_above_the_free_allowance_pays_the_fee(alice, transactional_db, standin, monkeypatch):
    fusion_catalog(standin)
    byok_only(alice)
    allowance = BYOK_MONTHLY_ALLOWANCE[Plan.PAY_AS_YOU_GO]  # alice's plan
    monkeypatch.setattr("routing.side_calls.byok_month_to_date", lambda account_id: allowance)  # spent this month
    response = post(alice)
    member = panel_of(response)[BYOK_ONLY]
    list_price = price_of(BYOK_ONLY, member["tokens"]["input"], member["tokens"]["output"])
    assert member["is_byok"] is True
    assert Decimal(str(member["cost_usd"])) == pytest.approx(list_price * BYOK_FEE_RATE, abs=Decimal("1e-12"))
    # the request's record charges the panel as its entry counts it (the fee for that member)
    record = Generation.objects.get(pk="gen-" + response.json()["id"].removeprefix("resp_"))
    assert record.cost >= Decimal(str(fusion_entry(response.json())["cost_usd"]))


def test_the_analyst_only_the_callers_key_serves_writes_the_answer(alice, carol, transactional_db, standin):
    fusion_catalog(standin, **{BYOK_ONLY: 'text={"consensus":["the answers agree"]}'})
    byok_only(alice)
    plugin = {"id": "fusion", "analysis_models": PANEL[:2], "model": BYOK_ONLY, "tools": []}
    response = post(alice, [plugin])
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["model"] == BYOK_ONLY and body["usage"]["is_byok"] is True
    assert fusion_entry(body)["data"]["analysis"]["status"] == "completed"
    assert set(credentials_for(standin, "gamma")) == {CUSTOMER_KEY}  # the analysis and the final answer
    # Without a key for it, the analyst cannot be planned: refused before any paid call
    standin.clear()
    refused = post(carol, [plugin])
    assert refused.status_code == 404, refused.content
    assert "credentials" in refused.json()["error"]["message"] and not standin.received


def test_the_fusion_tools_panel_uses_the_callers_key(alice, carol, transactional_db, standin):
    test_fusion_tools.catalog(standin)
    byok_only(alice)
    response = test_fusion_tools.ask(alice)
    assert response.status_code == 200, response.content
    item = response.json()["output"][0]
    assert item["type"] == "gateway:fusion" and "failed_models" not in item, item
    assert [r["model"] for r in item["responses"]] == PANEL
    assert credentials_for(standin, "gamma") == [CUSTOMER_KEY]
    standin.clear()
    item = test_fusion_tools.ask(carol).json()["output"][0]
    assert [failed["model"] for failed in item["failed_models"]] == [BYOK_ONLY]
    assert item["failed_models"][0]["status_code"] == 404
    assert credentials_for(standin, "gamma") == []


def panel_holds_while(account_id, run) -> tuple[list[tuple[Decimal, Decimal]], object]:
    """`run()`'s result, and the (held, upstream_cost) of the open panel holds another connection saw meanwhile."""
    seen: list[tuple[Decimal, Decimal]] = []
    stop = threading.Event()

    def watch() -> None:
        try:
            while not stop.is_set():
                rows = Generation.objects.filter(
                    account_id=account_id, requested_model="gateway/fusion (panel)", status="in_progress"
                )
                seen.extend(rows.values_list("held", "upstream_cost"))
                time.sleep(0.02)
        finally:
            connections.close_all()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run()
    finally:
        stop.set()
        watcher.join()
    return seen, result


@pytest.mark.parametrize("include_byok", [True, False])
def test_a_budget_counting_byok_holds_the_byok_member_at_its_list_price(alice, transactional_db, standin, include_byok):
    """As the request's own hold: the credits hold the BYOK member's fee; a budget that counts BYOK holds it at its
    list price (the open hold's upstream_cost), one that does not, at the fee."""
    fusion_catalog(standin)
    byok_only(alice)
    guardrail(alice, limit_usd=5.0, include_byok_in_budgets=include_byok)
    seen, response = panel_holds_while(alice.account_id, lambda: post(alice))
    assert panel_of(response)[BYOK_ONLY]["is_byok"] is True
    assert seen
    held, counted = seen[0]
    assert held > 0  # the other members and the analysis, at their list price
    if include_byok:
        assert counted > held  # the BYOK member's list-price worst case on top
    else:
        assert counted == 0
