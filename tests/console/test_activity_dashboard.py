"""Issue 17: GET /activity's numbers against generated traffic (per day, model, provider, key and workspace;
BYOK vs shared; the last 30 days only; a management key), and the admin dashboard (charts as inline SVG, the
top tables, endpoint health; a bad filter is an error on the page, never a 500)."""

import html
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

from gateway.accounts.models import ApiKey
from gateway.billing.models import Generation
from tests.support import assert_error_envelope


def ask(persona, **fields) -> Generation:
    body = {"model": "standin/echo", "input": "Hello there", **fields}
    response = persona.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200, response.content
    return Generation.objects.get(pk=response["X-Generation-Id"])


def activity(persona, **params):
    return persona.client(management=True).get("/api/v1/activity", params)


def test_activity_sums_the_generated_traffic_by_day_model_provider_key(alice, bob_other_account, standin_catalog):
    served = [ask(alice) for _ in range(3)] + [ask(alice, provider={"order": ["standin-anthropic"]})]
    ask(bob_other_account)  # another account's request is never counted
    # A request from 40 days ago is outside the window; one from 2 days ago is its own day.
    old, recent = served[0], served[1]
    Generation.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    two_days_ago = timezone.now() - timedelta(days=2)
    Generation.objects.filter(pk=recent.pk).update(created_at=two_days_ago)

    response = activity(alice)
    assert response.status_code == 200, response.content
    items = response.json()["data"]
    counted = Generation.objects.filter(account_id=alice.account_id).exclude(pk=old.pk)
    assert sum(item["requests"] for item in items) == counted.count() == 3
    assert sum(item["prompt_tokens"] for item in items) == counted.aggregate(t=Sum("tokens_input"))["t"]
    assert sum(item["completion_tokens"] for item in items) == counted.aggregate(t=Sum("tokens_output"))["t"]
    total = counted.aggregate(t=Sum("cost"))["t"]
    assert Decimal(str(sum(item["usage"] for item in items))).quantize(Decimal("1e-9")) == total.quantize(
        Decimal("1e-9")
    )
    assert all(item["byok_requests"] == 0 and item["byok_usage_inference"] == 0 for item in items)
    key_hash = ApiKey.objects.get(account_id=alice.account_id, kind="inference").hash
    assert {item["api_key_hash"] for item in items} == {key_hash}
    assert {item["workspace_id"] for item in items} == {str(alice.provisioned.workspace_id)}
    days = {item["date"] for item in items}
    assert days == {timezone.now().date().isoformat(), two_days_ago.date().isoformat()}
    assert [item["date"] for item in items] == sorted((item["date"] for item in items), reverse=True)
    per_provider: dict[str, int] = {}
    for item in items:
        per_provider[item["provider_name"]] = per_provider.get(item["provider_name"], 0) + item["requests"]
    expected: dict[str, int] = {}
    for generation in counted:
        expected[generation.provider] = expected.get(generation.provider, 0) + 1
    assert per_provider == expected and len(expected) >= 1  # the providers that served are apart

    one_day = activity(alice, date=two_days_ago.date().isoformat()).json()["data"]
    assert [(item["requests"], item["model"]) for item in one_day] == [(1, recent.model)]
    assert activity(alice, api_key_hash="0" * 64).json()["data"] == []


def test_activity_counts_byok_apart(alice, standin_catalog):
    generation = ask(alice)
    Generation.objects.filter(pk=generation.pk).update(is_byok=True, upstream_cost=Decimal("0.25"))
    ask(alice)
    items = activity(alice).json()["data"]
    assert sum(item["requests"] for item in items) == 2
    assert sum(item["byok_requests"] for item in items) == 1
    assert sum(item["byok_usage_inference"] for item in items) == 0.25


@pytest.mark.parametrize(
    "params,message",
    [
        ({"date": "2020-01-01"}, "within the last 30 days"),
        ({"date": "yesterday"}, "YYYY-MM-DD"),
        ({"date": "2026-02-30"}, "YYYY-MM-DD"),
        ({"api_key_hash": "XYZ"}, "api_key_hash"),
        ({"workspace_id": "nope"}, "workspace_id"),
        ({"date": "2026-01-0\x00"}, "date"),
        ({"api_key_hash": "a" * 63 + "\x00"}, "api_key_hash"),
    ],
)
def test_activity_refuses_bad_queries(alice, params, message):
    body = assert_error_envelope(activity(alice, **params), 400)
    assert message in str(body["error"])


def test_activity_needs_a_management_key(alice):
    assert_error_envelope(alice.client().get("/api/v1/activity"), 403)
    assert_error_envelope(Client().get("/api/v1/activity"), 401)


def test_dashboard_renders_charts_tables_and_health(staff, alice, standin_catalog):
    generation = ask(alice)
    failed = ask(alice)
    Generation.objects.filter(pk=failed.pk).update(status="failed")
    page = html.unescape(staff.get("/admin/dashboard/").content.decode())
    assert page.count('<svg class="gw-chart"') == 5
    assert "2</strong> requests" in page and "1</strong> errors" in page
    assert generation.model in page and generation.provider in page and "alice" in page
    assert "healthy" in page and "standin/echo" in page
    assert "<script" not in page.split('<div id="content-main"')[1]  # no JavaScript in the dashboard
    for window in ("7d", "30d"):
        assert staff.get("/admin/dashboard/", {"range": window}).status_code == 200
    filtered = html.unescape(staff.get("/admin/dashboard/", {"model": "no/such"}).content.decode())
    assert "0</strong> requests" in filtered
    by_account = html.unescape(staff.get("/admin/dashboard/", {"account": str(alice.account_id)}).content.decode())
    assert "2</strong> requests" in by_account


def test_dashboard_shows_bad_filters_and_needs_staff(staff, alice):
    page = html.unescape(
        staff.get(
            "/admin/dashboard/", {"account": "x", "range": "1y", "model": "a\x00b", "provider": "p" * 300}
        ).content.decode()
    )
    assert "account: not an account id" in page and "range: one of 24h, 7d, 30d" in page
    assert "model: control characters are not allowed" in page and "provider: at most 256 characters" in page
    anonymous = Client().get("/admin/dashboard/")
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
