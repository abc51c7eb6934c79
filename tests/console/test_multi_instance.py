"""Issue 17: several gateway instances (gunicorn processes on loopback) sharing the database and the cache, as the
compose file runs them: a load spread over both is served and billed once per request, and a key disabled or an
account suspended through one instance is refused by the other within CACHE_VERSION_CHECK_SECONDS."""

import time

import pytest
import requests

from gateway.accounts.models import ApiKey
from gateway.billing.models import Generation
from tests.live import LiveGateway

WINDOW = 0.5  # CACHE_VERSION_CHECK_SECONDS of both instances (the default)


@pytest.fixture
def instances(transactional_db):
    started = []
    try:
        for _ in range(2):
            started.append(LiveGateway(workers=1, threads=8, extra_env={"CACHE_VERSION_CHECK_SECONDS": str(WINDOW)}))
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def refused_within(url: str, headers: dict, status: int, limit: float) -> float:
    """Seconds until `url` answers `status` (polled; fails after `limit`)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if requests.get(url, headers=headers, timeout=5).status_code == status:
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"{url} still not {status} after {limit} s")


def test_load_spread_over_two_instances_is_served_and_billed_once(alice, standin_catalog, instances):
    headers = {"Authorization": f"Bearer {alice.api_key}"}
    ids = []
    for index in range(10):
        gateway = instances[index % 2]
        response = requests.post(
            f"{gateway.api}/responses", json={"model": "standin/echo", "input": "Hi"}, headers=headers, timeout=20
        )
        assert response.status_code == 200, response.text
        ids.append(response.headers["X-Generation-Id"])
    assert len(set(ids)) == 10
    rows = Generation.objects.filter(pk__in=ids)
    assert rows.count() == 10 and all(row.status == "completed" and row.cost > 0 for row in rows)
    charges = alice.client(management=True).get("/api/v1/credits").json()["data"]["total_usage"]
    assert abs(charges - float(sum(row.cost for row in rows))) < 1e-9


def test_a_key_disabled_on_one_instance_is_refused_on_the_other_within_the_window(instances, alice):
    first, second = instances
    inference = {"Authorization": f"Bearer {alice.api_key}"}
    assert requests.get(f"{second.api}/key", headers=inference, timeout=5).status_code == 200  # cached there now
    key_hash = ApiKey.objects.get(account_id=alice.account_id, kind="inference").hash
    response = requests.patch(
        f"{first.api}/keys/{key_hash}",
        json={"disabled": True},
        headers={"Authorization": f"Bearer {alice.management_key}"},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    assert requests.get(f"{first.api}/key", headers=inference, timeout=5).status_code == 401  # at once there
    elapsed = refused_within(f"{second.api}/key", inference, 401, limit=WINDOW + 2)
    assert elapsed <= WINDOW + 1.0, elapsed  # the window, plus a loaded machine's scheduling


def test_a_suspended_account_is_refused_on_every_instance(instances, alice):
    from gateway.accounts.models import Account

    inference = {"Authorization": f"Bearer {alice.api_key}"}
    for gateway in instances:
        assert requests.get(f"{gateway.api}/key", headers=inference, timeout=5).status_code == 200
    account = Account.objects.get(pk=alice.account_id)
    account.suspended, account.suspended_reason = True, "abuse report 42"
    account.save(update_fields=["suspended", "suspended_reason"])  # as the admin does, from a third process
    for gateway in instances:
        refused_within(f"{gateway.api}/key", inference, 403, limit=WINDOW + 2)
        body = requests.get(f"{gateway.api}/key", headers=inference, timeout=5).json()
        assert "abuse report 42" in body["error"]["message"]
