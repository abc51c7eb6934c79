"""The credits ledger: top-ups, holds and their settlement, /credits, the operator commands. Holds are not in the
ledger: a hold is its generation row (in_progress) plus the account's `reserved`."""

import json
import threading
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gateway.accounts.models import Account, ApiKey
from gateway.billing.generations import GenerationRecord
from gateway.billing.models import IN_PROGRESS, Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from gateway.billing.selectors import credits_summary
from gateway.billing.services import (
    HOLD_EXPIRED,
    MSG_INSUFFICIENT,
    MSG_KEY_LIMIT,
    ReservationHandle,
    credits_reserve,
    credits_settle,
    credits_topup,
    generation_settle,
    holds_expire,
)
from gateway.errors import PaymentRequired
from tests.billing.books import assert_books
from tests.support import Persona

on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="needs real concurrent transactions")


def release(hold: ReservationHandle) -> Decimal:
    """Close a hold as a failed request does: nothing charged."""
    record = GenerationRecord(
        id=hold.id,
        account_id=hold.account_id,
        api_key_id=hold.api_key_id,
        workspace_id=None,
        requested_model="",
        status="failed",
    )
    return generation_settle(reservation=hold, record=record, charge=False)


def test_credits_endpoint_reports_totals(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    credits_settle(reservation=reservation, cost=Decimal("1.5"))
    data = alice.client(management=True).get("/api/v1/credits").json()
    assert data == {"data": {"total_credits": 10.0, "total_usage": 1.5}}
    assert assert_books(alice.account_id).balance == Decimal("8.5")


def test_a_hold_is_reserved_outside_the_ledger_then_settles_to_the_actual_cost(alice):
    # Given 10 USD, when 3 are held, they are reserved: the balance and the ledger do not move
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("3"), requested_model="m/x")
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), Decimal("3"))
    opened = Generation.objects.get(pk=reservation.id)
    assert (opened.status, opened.held, opened.requested_model) == (IN_PROGRESS, Decimal("3"), "m/x")
    assert LedgerEntry.objects.filter(account_id=alice.account_id).count() == 1  # the initial top-up only
    # When settled at 0.4, one charge is written and the hold is gone
    settled = credits_settle(reservation=reservation, cost=Decimal("0.4"))
    assert settled.charged == Decimal("0.4") and settled.shortfall == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("9.6"), Decimal("0"))
    assert list(LedgerEntry.objects.filter(generation_id=reservation.id).values_list("kind", "amount")) == [
        ("charge", Decimal("-0.4"))
    ]
    assert Generation.objects.get(pk=reservation.id).status == "completed"
    # And settling twice charges nothing more
    again = credits_settle(reservation=reservation, cost=Decimal("0.4"))
    assert again.charged == 0 and assert_books(alice.account_id).balance == Decimal("9.6")


def test_a_release_returns_everything_once_and_writes_no_ledger_entry(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("4"))
    assert release(reservation) == 0 and release(reservation) == 0
    assert credits_settle(reservation=reservation, cost=Decimal("4")).charged == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), Decimal("0"))
    assert not LedgerEntry.objects.filter(generation_id=reservation.id).exists()
    assert Generation.objects.get(pk=reservation.id).status == "failed"


def test_a_hold_beyond_the_spendable_balance_is_402_and_changes_nothing(alice):
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=Decimal("10.000001"))
    assert caught.value.status == 402 and caught.value.message == MSG_INSUFFICIENT
    with pytest.raises(PaymentRequired):  # far beyond what the columns hold: still a 402
        credits_reserve(account_id=alice.account_id, amount=Decimal("1e30"))
    # Open holds count: 6 held leaves 4 to hold
    credits_reserve(account_id=alice.account_id, amount=Decimal("6"))
    with pytest.raises(PaymentRequired):
        credits_reserve(account_id=alice.account_id, amount=Decimal("4.01"))
    credits_reserve(account_id=alice.account_id, amount=Decimal("4"))
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), Decimal("10"))
    assert Generation.objects.filter(account_id=alice.account_id).count() == 2


def test_cost_above_the_balance_never_goes_negative(alice):
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    settled = credits_settle(reservation=reservation, cost=Decimal("25"))
    assert settled.charged == Decimal("10") and settled.shortfall == Decimal("15")
    assert assert_books(alice.account_id).balance == 0
    assert Generation.objects.get(pk=reservation.id).cost == Decimal("10")


def test_a_shortfall_never_takes_another_requests_hold(alice):
    first = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    second = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    # The first can reach the spendable 7 plus its own 1, not the second's 2
    assert credits_settle(reservation=first, cost=Decimal("25")).charged == Decimal("8")
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("2"), Decimal("2"))
    assert credits_settle(reservation=second, cost=Decimal("2")).charged == Decimal("2")
    assert assert_books(alice.account_id).balance == 0


def test_key_limit_caps_holds_and_counts_what_was_spent(alice):
    key = alice.provisioned.inference_key.key
    ApiKey.objects.filter(pk=key.pk).update(limit=Decimal("1"))
    first = credits_reserve(account_id=alice.account_id, amount=Decimal("0.6"), api_key_id=key.pk)
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=Decimal("0.6"), api_key_id=key.pk)
    assert caught.value.message == MSG_KEY_LIMIT
    # Once settled at 0.5, 0.5 is left under the limit
    credits_settle(reservation=first, cost=Decimal("0.5"))
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=Decimal("0.51"), api_key_id=key.pk)
    assert caught.value.metadata == {"limit": 1.0, "usage": 0.5}
    credits_reserve(account_id=alice.account_id, amount=Decimal("0.5"), api_key_id=key.pk)
    assert assert_books(alice.account_id).reserved == Decimal("0.5")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the statement counts are PostgreSQL's")
def test_a_hold_and_a_settlement_are_one_statement_each(alice):
    key = alice.provisioned.inference_key.key
    with CaptureQueriesContext(connection) as hold:
        reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("1"), api_key_id=key.pk)
    with CaptureQueriesContext(connection) as settle:
        credits_settle(reservation=reservation, cost=Decimal("0.5"))
    assert (len(hold), len(settle)) == (1, 1)  # the key (checked for a limit) is locked in the same round trip
    with CaptureQueriesContext(connection) as hold:
        reservation = credits_reserve(
            account_id=alice.account_id, amount=Decimal("1"), api_key_id=key.pk, key_has_limit=False
        )
    ApiKey.objects.filter(pk=key.pk).update(limit=Decimal("5"))
    with CaptureQueriesContext(connection) as limited:
        credits_reserve(account_id=alice.account_id, amount=Decimal("1"), api_key_id=key.pk)
    assert (len(hold), len(limited)) == (1, 1)
    assert assert_books(alice.account_id).reserved == Decimal("2")


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
    credits_reserve(account_id=alice.account_id, amount=Decimal("1.5"))
    call_command("topup_credits", str(alice.account_id), "2.5", "--note", "invoice 7", stdout=out)
    printed = json.loads(out.getvalue())
    assert Decimal(printed["balance"]) == Decimal("12.5") and Decimal(printed["reserved"]) == Decimal("1.5")
    call_command("topup_credits", "alice", "1", stdout=StringIO())
    assert credits_summary(account_id=alice.account_id).total_credits == Decimal("13.5")


def race(count: int, work) -> list[str]:
    """Run work(index) in `count` threads released at once; each returns "ok", or "402" on PaymentRequired."""
    barrier = threading.Barrier(count)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(index: int):
        try:
            barrier.wait()
            work(index)
            result = "ok"
        except PaymentRequired:
            result = "402"
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    workers = [threading.Thread(target=attempt, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(outcomes) == count  # no thread died of anything else
    return outcomes


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_holds_admit_exactly_k():
    # Given a balance that admits exactly k requests of 1 USD, half of them through a key (without a limit)
    k, threads = 7, 24
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(k)))
    key_id = carol.provisioned.inference_key.key.pk

    def work(index: int):
        hold = credits_reserve(account_id=carol.account_id, amount=Decimal(1), api_key_id=key_id if index % 2 else None)
        credits_settle(reservation=hold, cost=Decimal(1))

    # When many threads race for it
    outcomes = race(threads, work)
    # Then exactly k succeed, the rest get 402, and the books balance at zero
    assert outcomes.count("ok") == k and outcomes.count("402") == threads - k
    account = assert_books(carol.account_id)
    assert (account.balance, account.reserved) == (0, 0)
    assert credits_summary(account_id=carol.account_id).total_usage == Decimal(k)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_settlements_leave_the_exact_balance():
    # Given 10 USD and 40 requests that each hold 1 and cost 0.25
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(10)))

    def work(index: int):
        hold = credits_reserve(account_id=carol.account_id, amount=Decimal(1))
        assert credits_settle(reservation=hold, cost=Decimal("0.25")).charged == Decimal("0.25")

    outcomes = race(40, work)
    # Then at least the 10 the balance can hold at once succeed, each charged exactly once
    served = outcomes.count("ok")
    assert served >= 10
    account = assert_books(carol.account_id)
    assert (account.balance, account.reserved) == (Decimal(10) - Decimal("0.25") * served, 0)
    assert LedgerEntry.objects.filter(account_id=carol.account_id, kind="charge").count() == served
    assert Generation.objects.filter(account_id=carol.account_id).count() == served  # a 402 writes no row


@on_postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit_reset", [None, "daily"])
def test_concurrent_holds_never_overrun_a_key_limit(limit_reset):
    # Given 10 USD and a key limited to 3 (lifetime, or daily)
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(10)))
    key_id = carol.provisioned.inference_key.key.pk
    ApiKey.objects.filter(pk=key_id).update(limit=Decimal(3), limit_reset=limit_reset)

    def work(index: int):
        hold = credits_reserve(account_id=carol.account_id, amount=Decimal(1), api_key_id=key_id)
        credits_settle(reservation=hold, cost=Decimal(1))

    # When 24 requests of 1 race through it, then exactly 3 are served: the limit, not the balance, stops them
    outcomes = race(24, work)
    assert outcomes.count("ok") == 3
    account = assert_books(carol.account_id)
    assert (account.balance, account.reserved) == (Decimal(7), 0)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_the_sweep_and_late_settlements_close_each_hold_exactly_once():
    # Given 20 holds of 0.5 that look stale
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(10)))
    holds = [credits_reserve(account_id=carol.account_id, amount=Decimal("0.5")) for _ in range(20)]
    Generation.objects.update(created_at=timezone.now() - timedelta(hours=7))
    swept: list[int] = []

    def work(index: int):
        if index == 20:
            swept.append(holds_expire(older_than_seconds=3600))
        else:
            credits_settle(reservation=holds[index], cost=Decimal("0.5"))

    # When the sweep races their (late) settlements
    assert race(21, work).count("ok") == 21
    # Then each hold was either charged once or expired with no charge, never both
    charged = set(LedgerEntry.objects.filter(kind="charge").values_list("generation_id", flat=True))
    expired = set(Generation.objects.filter(error_type=HOLD_EXPIRED).values_list("id", flat=True))
    assert not charged & expired and len(charged | expired) == 20 and swept == [len(expired)]
    assert set(Generation.objects.filter(status="completed").values_list("id", flat=True)) == charged
    account = assert_books(carol.account_id)
    assert (account.balance, account.reserved) == (Decimal(10) - Decimal("0.5") * len(charged), 0)


def test_stale_holds_are_released_by_the_sweeper(alice):
    old = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    fresh = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    Generation.objects.filter(pk=old.id).update(created_at=timezone.now() - timedelta(hours=7))
    out = StringIO()
    call_command("release_stale_reservations", stdout=out)
    assert "released 1" in out.getvalue()
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), Decimal("2"))
    expired = Generation.objects.get(pk=old.id)
    assert (expired.status, expired.error_type, expired.cost) == ("failed", HOLD_EXPIRED, 0)
    assert credits_settle(reservation=old, cost=Decimal("3")).charged == 0  # a very late settlement: no charge
    call_command("release_stale_reservations", stdout=out)  # and the sweep again: nothing more
    credits_settle(reservation=fresh, cost=Decimal("1"))
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("9"), 0)
    assert LedgerEntry.objects.filter(generation_id=old.id).count() == 0


def test_a_402_first_releases_the_accounts_own_stale_holds(alice, bob_other_account):
    # Given a killed worker's hold of 8 (of alice's 10) and one of bob's, both stale
    stale = credits_reserve(account_id=alice.account_id, amount=Decimal("8"))
    bobs = credits_reserve(account_id=bob_other_account.account_id, amount=Decimal("1"))
    Generation.objects.update(created_at=timezone.now() - timedelta(hours=7))
    # When alice asks for 5, her stale hold is expired and the new one admitted; bob's is not touched
    credits_reserve(account_id=alice.account_id, amount=Decimal("5"))
    assert Generation.objects.get(pk=stale.id).error_type == HOLD_EXPIRED
    assert Generation.objects.get(pk=bobs.id).status == IN_PROGRESS
    assert assert_books(alice.account_id).reserved == Decimal("5")
    assert assert_books(bob_other_account.account_id).reserved == Decimal("1")
