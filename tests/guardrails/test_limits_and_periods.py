"""A guardrail's ZDR and data-collection limits change where a request routes (four stand-in providers with
different policies: tests.support.PROVIDERS), and a budget's period resets when a controlled clock crosses it."""

from datetime import datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest

from gateway.billing import selectors as billing_selectors
from guardrails import selectors as guardrail_selectors
from guardrails.selectors import period_bounds
from tests.guardrails.test_enforcement import METADATA, guardrail, one_request_costs, served_provider
from tests.support import assert_error_envelope


def ask_multi(persona, **provider):
    body = {"model": "multi/model", "input": "Hello", "provider": {"sort": "price", **provider}}
    return persona.client().post("/api/v1/responses", body, format="json", **METADATA)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"enforce_zdr": True}, "gamma/us"),  # beta keeps no ZDR promise
        ({"data_collection": "deny"}, "gamma/us"),  # beta retains prompts
    ],
)
def test_zdr_and_data_collection_limits_change_where_it_routes(alice, multi, limits, expected):
    assert served_provider(ask_multi(alice, ignore=["alpha"])) == "beta"  # the cheapest left without the guardrail
    guardrail(alice, **limits)
    response = ask_multi(alice, ignore=["alpha"])
    assert response.status_code == 200, response.content
    assert served_provider(response) == expected


@pytest.mark.parametrize("limit", [{"enforce_zdr": True}, {"data_collection": "deny"}])
def test_data_limits_that_leave_nothing_are_a_403_naming_the_guardrail(alice, multi, limit):
    guardrail(alice, ignored_providers=["alpha", "gamma/us"], **limit)  # beta and gamma/eu: no ZDR, retain
    body = assert_error_envelope(ask_multi(alice), 403)
    assert "guardrail Team policy" in body["error"]["message"]
    assert multi.requests_for("/chat/completions") == []


class Clock:
    """Stands in for django.utils.timezone in the modules that decide a budget's period."""

    def __init__(self, now):
        self.moment = now

    def now(self):
        return self.moment


@pytest.mark.parametrize("interval", ["daily", "weekly", "monthly"])
def test_a_budget_resets_when_the_clock_crosses_its_period(alice, standin_catalog, monkeypatch, interval):
    held, cost = one_request_costs(alice)
    record = guardrail(alice, limit_usd=float(held + cost / 2), reset_interval=interval)
    _start, resets_at = period_bounds(interval)
    clock = Clock(billing_selectors.timezone.now())
    for module in (billing_selectors, guardrail_selectors):
        monkeypatch.setattr(module, "timezone", SimpleNamespace(now=clock.now))

    assert [ask_multi_standin(alice) for _ in range(2)] == [200, 403]
    clock.moment = resets_at - timedelta(microseconds=1)  # the last instant of the period: still spent
    body = assert_error_envelope(alice.client().post("/api/v1/responses", standin_body(), format="json"), 403)
    assert resets_at.isoformat() in body["error"]["message"]

    clock.moment = resets_at  # the next period: nothing spent in it yet
    assert ask_multi_standin(alice) == 200
    shown = alice.client(management=True).get(f"/api/v1/guardrails/{record['id']}").json()["data"]
    assert datetime.fromisoformat(shown["resets_at"]) == period_bounds(interval, resets_at)[1] > resets_at
    assert Decimal(str(shown["usage"])) == 0  # the spend is dated (by the real clock) in the period before


def standin_body() -> dict:
    return {"model": "standin/echo", "input": "Hello", "provider": {"sort": "price"}}


def ask_multi_standin(persona) -> int:
    return persona.client().post("/api/v1/responses", standin_body(), format="json").status_code
