"""A workspace default guardrail's budget is one pool for the workspace: every request under it counts, whichever
of the workspace's keys made it, and the figure checked is the figure the record shows (`usage`)."""

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from django.db import connection

from gateway.accounts.services import api_key_create
from gateway.billing.models import Generation
from tests.guardrails.test_enforcement import guardrail, one_request_costs
from tests.support import assert_error_envelope


def second_key_client(persona):
    """Another inference key of the persona's workspace, with no guardrail of its own."""
    from rest_framework.test import APIClient

    issued = api_key_create(account_id=persona.account_id, name="second")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    return client


def ask_with(client, text: str = "Hello"):
    body = {"model": "standin/echo", "input": text, "provider": {"sort": "price"}}  # as one_request_costs
    return client.post("/api/v1/responses", body, format="json")


def spent_and_held(persona) -> Decimal:
    rows = Generation.objects.filter(account_id=persona.account_id)
    return sum((row.cost + (row.held if row.status == "in_progress" else 0) for row in rows), Decimal(0))


def record_usage(persona, guardrail_id: str) -> Decimal:
    response = persona.client(management=True).get(f"/api/v1/guardrails/{guardrail_id}")
    assert response.status_code == 200, response.content
    return Decimal(str(response.json()["data"]["usage"]))


def test_the_workspace_keys_share_the_default_budget_and_the_record_shows_it(alice, standin_catalog):
    held, cost = one_request_costs(alice)
    limit = held + cost * 5 / 2  # room for three requests in all, whichever key makes them
    record = guardrail(alice, assign=False, is_workspace_default=True, limit_usd=float(limit), reset_interval="daily")
    first, second = alice.client(), second_key_client(alice)
    statuses = [ask_with(client).status_code for client in (first, second, first, second, first)]
    assert statuses == [200, 200, 200, 403, 403]  # a per-key budget would have let the second key's 2nd through
    body = assert_error_envelope(ask_with(second), 403)
    assert "guardrail Team policy" in body["error"]["message"] and "resets at" in body["error"]["message"]
    assert record_usage(alice, record["id"]) == spent_and_held(alice) == cost * 3
    assert spent_and_held(alice) <= limit


def test_a_key_with_its_own_guardrail_spends_outside_the_workspace_pool(alice, standin_catalog):
    held, cost = one_request_costs(alice)
    guardrail(alice, assign=False, is_workspace_default=True, limit_usd=float(held + cost / 2))
    own = guardrail(alice, limit_usd=100)  # assigned to alice's key: that key is no longer under the default
    assert [ask_with(alice.client()).status_code for _ in range(3)] == [200, 200, 200]
    assert ask_with(second_key_client(alice)).status_code == 200  # the pool has spent nothing yet
    assert record_usage(alice, own["id"]) == cost * 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_several_keys_never_overshoot_the_workspace_pool(alice, standin_catalog):
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    held, cost = one_request_costs(alice)
    limit = held + 5 * cost
    guardrail(alice, assign=False, is_workspace_default=True, limit_usd=float(limit))
    clients = [alice.client(), second_key_client(alice), second_key_client(alice), second_key_client(alice)]

    def one(index):
        response = ask_with(clients[index % len(clients)], "Hello there")
        connection.close()
        return response.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(one, range(24)))
    assert set(statuses) <= {200, 403} and 200 in statuses and 403 in statuses
    assert spent_and_held(alice) <= limit
    used = {row.api_key_id for row in Generation.objects.filter(account_id=alice.account_id, cost__gt=0)}
    assert len(used) > 1  # the spend came from several keys, checked against one budget
