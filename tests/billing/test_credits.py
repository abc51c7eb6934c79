"""The credits ledger: top-ups, reservations and their settlement, /credits, the operator commands."""

import json
import threading
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.db.models import Sum

from gateway.accounts.models import Account, ApiKey
from gateway.billing.models import LedgerEntry
from gateway.billing.provisioning import account_provision
from gateway.billing.selectors import credits_summary
from gateway.billing.services import (
    MSG_INSUFFICIENT,
    MSG_KEY_LIMIT,
    credits_release,
    credits_reserve,
    credits_settle,
    credits_topup,
)
from gateway.errors import PaymentRequired
from tests.support import Persona


def ledger_sum(account_id) -> Decimal:
    return LedgerEntry.objects.filter(account_id=account_id).aggregate(s=Sum("amount"))["s"] or Decimal(0)


def balance(account_id) -> Decimal:
    return Account.objects.get(pk=account_id).balance


def test_credits_endpoint_reports_totals(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    credits_settle(reservation=reservation, cost=Decimal("1.5"))
    data = alice.client(management=True).get("/api/v1/credits").json()
    assert data == {"data": {"total_credits": 10.0, "total_usage": 1.5}}
    assert balance(alice.account_id) == Decimal("8.5") == ledger_sum(alice.account_id)


def test_reservation_holds_then_settles_to_actual_cost(alice):
    # Given 10 USD, when 3 are reserved, the balance drops by 3 at once
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    assert balance(alice.account_id) == Decimal("7")
    # When settled at 0.4, the unused 2.6 come back
    settled = credits_settle(reservation=reservation, cost=Decimal("0.4"), generation_id="gen-1")
    assert settled.charged == Decimal("0.4") and settled.shortfall == 0
    assert balance(alice.account_id) == Decimal("9.6") == ledger_sum(alice.account_id)
    # And settling twice charges nothing more
    again = credits_settle(reservation=reservation, cost=Decimal("0.4"))
    assert again.charged == 0 and balance(alice.account_id) == Decimal("9.6")


def test_release_returns_everything_once(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("4"))
    credits_release(reservation=reservation)
    credits_release(reservation=reservation)
    credits_settle(reservation=reservation, cost=Decimal("4"))
    assert balance(alice.account_id) == Decimal("10") == ledger_sum(alice.account_id)


def test_reservation_beyond_balance_is_402_and_changes_nothing(alice):
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=Decimal("10.000001"))
    assert caught.value.status == 402 and caught.value.message == MSG_INSUFFICIENT
    assert balance(alice.account_id) == Decimal("10") == ledger_sum(alice.account_id)


def test_cost_above_the_balance_never_goes_negative(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    settled = credits_settle(reservation=reservation, cost=Decimal("25"))
    assert settled.charged == Decimal("10") and settled.shortfall == Decimal("15")
    assert balance(alice.account_id) == 0 == ledger_sum(alice.account_id)


def test_key_limit_caps_reservations(alice):
    key = alice.provisioned.inference_key.key
    ApiKey.objects.filter(pk=key.pk).update(limit=Decimal("1"))
    credits_reserve(account_id=alice.account_id, amount=Decimal("0.6"), api_key_id=key.pk)
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=Decimal("0.6"), api_key_id=key.pk)
    assert caught.value.message == MSG_KEY_LIMIT


def test_topup_rejects_non_positive_amounts(alice):
    from gateway.errors import GatewayError

    with pytest.raises(GatewayError):
        credits_topup(account_id=alice.account_id, amount=Decimal("0"))


@pytest.mark.django_db
def test_create_account_command_prints_working_keys():
    out = StringIO()
    call_command("create_account", "--name", "acme", "--plan", "enterprise", "--credits", "12.5", stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["api_key"].startswith("sk-gw-v1-inf-")
    assert printed["management_key"].startswith("sk-gw-v1-mgmt-")
    account = Account.objects.get(pk=printed["account_id"])
    assert account.plan == "enterprise" and account.workspaces.get(is_default=True).pk.hex
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {printed['management_key']}")
    assert client.get("/api/v1/credits").json()["data"]["total_credits"] == 12.5


@pytest.mark.django_db
def test_topup_command_adds_credits(alice):
    out = StringIO()
    call_command("topup_credits", str(alice.account_id), "2.5", "--note", "invoice 7", stdout=out)
    assert json.loads(out.getvalue())["balance"].startswith("12.5")
    call_command("topup_credits", "alice", "1", stdout=StringIO())
    assert credits_summary(account_id=alice.account_id).total_credits == Decimal("13.5")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs real concurrent transactions")
@pytest.mark.django_db(transaction=True)
def test_concurrent_reservations_admit_exactly_k():
    # Given a balance that admits exactly k reservations of 1 USD
    k, threads_count = 7, 24
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(k)))
    key_id = carol.provisioned.inference_key.key.pk
    barrier = threading.Barrier(threads_count)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(index: int):
        try:
            barrier.wait()
            reservation = credits_reserve(
                account_id=carol.account_id, amount=Decimal(1), api_key_id=key_id if index % 2 else None
            )
            credits_settle(reservation=reservation, cost=Decimal(1))
            result = "ok"
        except PaymentRequired:
            result = "402"
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    # When many threads race for it
    workers = [threading.Thread(target=attempt, args=(i,)) for i in range(threads_count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # Then exactly k succeed, the rest get 402, and the ledger sums to the (zero) balance
    assert outcomes.count("ok") == k and outcomes.count("402") == threads_count - k
    assert balance(carol.account_id) == 0 == ledger_sum(carol.account_id)
    assert credits_summary(account_id=carol.account_id).total_usage == Decimal(k)


def test_stale_reservations_are_released_by_the_sweeper(alice):
    from datetime import timedelta

    from django.utils import timezone

    from gateway.billing.models import Reservation

    old = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    fresh = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    Reservation.objects.filter(pk=old.id).update(created_at=timezone.now() - timedelta(hours=7))
    out = StringIO()
    call_command("release_stale_reservations", stdout=out)
    assert "released 1" in out.getvalue()
    assert balance(alice.account_id) == Decimal("8") == ledger_sum(alice.account_id)
    credits_settle(reservation=old, cost=Decimal("3"))  # a very late settlement charges nothing twice
    assert balance(alice.account_id) == Decimal("8")
    credits_settle(reservation=fresh, cost=Decimal("1"))
    assert balance(alice.account_id) == Decimal("9") == ledger_sum(alice.account_id)
