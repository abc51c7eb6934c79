"""A fusion panel runs before the request's own credit hold: its worst case is held first (a hold of its own),
given back once the request's hold covers what the panel spent, or when the request is refused. Before, the panel
was only checked against the spendable balance: concurrent requests could each pass the check and spend it twice
(the charge is capped at the balance, so the gateway paid the difference)."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.db import connections

from gateway.accounts.models import Account
from gateway.billing.models import Generation, LedgerEntry
from gateway.errors import GatewayError
from responses_api import pipeline
from tests.billing.books import assert_books
from tests.plugins.test_fusion import fusion_catalog, post

PANEL_HOLD = "gateway/fusion (panel)"


@contextmanager
def panel_holds_seen(account_id, label: str = PANEL_HOLD) -> Iterator[list]:
    """The amounts of the panel holds open while the block runs, as another connection sees them."""
    seen: list = []
    stop = threading.Event()

    def watch() -> None:
        try:
            while not stop.is_set():
                held = Generation.objects.filter(account_id=account_id, requested_model=label, status="in_progress")
                seen.extend(held.values_list("held", flat=True))
                time.sleep(0.02)
        finally:
            connections.close_all()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


def test_the_panel_is_held_while_it_runs_and_given_back_after(alice, transactional_db, standin):
    fusion_catalog(standin)
    with panel_holds_seen(alice.account_id) as seen:
        response = post(alice)
    assert response.status_code == 200, response.content
    assert seen and all(amount > 0 for amount in seen)  # held during the panel's 400 ms
    assert not Generation.objects.filter(requested_model=PANEL_HOLD).exists()  # given back, no row left
    account = assert_books(alice.account_id)
    assert account.reserved == 0
    record = Generation.objects.get(pk="gen-" + response.json()["id"].removeprefix("resp_"))
    charged = -LedgerEntry.objects.get(generation_id=record.id, kind="charge").amount
    assert charged == record.cost > 0  # the panel's cost charged once, with the request


def test_a_request_refused_after_the_panel_gives_the_hold_back_and_pays_the_panel(
    alice, transactional_db, standin, monkeypatch
):
    fusion_catalog(standin)

    def no_route(**kwargs):
        raise GatewayError("no endpoint left", status=404)

    monkeypatch.setattr(pipeline, "response_plan", no_route)
    before = Account.objects.get(pk=alice.account_id).balance
    response = post(alice)
    assert response.status_code == 404, response.content
    assert not Generation.objects.filter(requested_model=PANEL_HOLD).exists()
    account = assert_books(alice.account_id)
    assert account.reserved == 0
    [blocked] = Generation.objects.filter(account_id=alice.account_id, error_type="blocked")
    assert before - account.balance == blocked.cost > 0  # what the panel spent is charged, once


@pytest.mark.skipif("connections['default'].vendor != 'postgresql'", reason="concurrent holds need PostgreSQL")
def test_two_requests_cannot_spend_one_panel_twice(alice, transactional_db, standin):
    fusion_catalog(standin)
    with panel_holds_seen(alice.account_id) as seen:
        assert post(alice).status_code == 200
    worst = max(seen)
    # A balance that covers one panel's worst case, not two
    Account.objects.filter(pk=alice.account_id).update(balance=worst * Decimal("1.5"))
    LedgerEntry.objects.filter(account_id=alice.account_id).delete()  # the books restart from the new balance
    LedgerEntry.objects.create(account_id=alice.account_id, kind="topup", amount=worst * Decimal("1.5"))
    standin.clear()
    results: list[int] = []

    def one() -> None:
        try:
            results.append(post(alice).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200, 402], results  # the second panel was refused before any call
    assert len(standin.received) == 5  # one panel (3 members), its analysis and the final answer
    account = assert_books(alice.account_id)
    assert account.balance >= 0 and account.reserved == 0


# ---- the gateway:fusion tool ------------------------------------------------------------------------------------


def test_a_fusion_tools_panel_is_held_until_the_request_settles(alice, transactional_db, standin):
    """The tool runs inside a request that is already held: its panel's worst case is held too (two requests, or
    two runs in one, cannot spend the same credits), and given back once the request has charged what it spent."""
    from tests.plugins.test_fusion_tools import ask as ask_tool
    from tests.plugins.test_fusion_tools import catalog as tool_catalog

    tool_catalog(standin, **{model: f"latency_ms=300,text=Answer from {model}" for model in ("acme/alpha",)})
    with panel_holds_seen(alice.account_id, "gateway:fusion (panel)") as seen:
        response = ask_tool(alice)
    assert response.status_code == 200, response.content
    assert [item["type"] for item in response.json()["output"]][0] == "gateway:fusion"
    assert seen and all(amount > 0 for amount in seen)  # held while the panel ran
    assert not Generation.objects.filter(requested_model="gateway:fusion (panel)").exists()
    account = assert_books(alice.account_id)
    assert account.reserved == 0
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert -LedgerEntry.objects.get(generation_id=record.id, kind="charge").amount == record.cost > 0
