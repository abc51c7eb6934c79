"""The hold and the settlement are one definition run on both databases (billing.statements): on SQLite, which
keeps decimals as doubles, amounts of the money columns' 12 places still hold, settle and come back exactly."""

from decimal import Decimal

import pytest

from gateway.accounts.models import Plan
from gateway.billing.models import Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from gateway.billing.services import credits_reserve, credits_settle, hold_drop, holds_expire
from gateway.errors import PaymentRequired
from tests.billing.books import assert_books


@pytest.fixture
def tenths(db):
    """An account of 0.3 credits: 0.1 + 0.2 is not 0.3 in doubles."""
    return account_provision(name="tenths", plan=Plan.PAY_AS_YOU_GO, credits=Decimal("0.3")).account_id


def test_holds_take_the_whole_balance_and_settle_it_exactly(tenths):
    first = credits_reserve(account_id=tenths, amount=Decimal("0.1"))
    second = credits_reserve(account_id=tenths, amount=Decimal("0.2"))  # all that is left
    assert assert_books(tenths).reserved == Decimal("0.3")
    with pytest.raises(PaymentRequired):
        credits_reserve(account_id=tenths, amount=Decimal("1e-12"))
    assert credits_settle(reservation=first, cost=Decimal("0.1")).charged == Decimal("0.1")
    settled = credits_settle(reservation=second, cost=Decimal("0.25"))  # charged down to what the balance reaches
    assert (settled.charged, settled.shortfall) == (Decimal("0.2"), Decimal("0.05"))
    books = assert_books(tenths)
    assert (books.balance, books.reserved) == (Decimal(0), Decimal(0))
    charges = LedgerEntry.objects.filter(account_id=tenths, kind="charge").order_by("amount")
    assert list(charges.values_list("amount", flat=True)) == [Decimal("-0.2"), Decimal("-0.1")]
    assert credits_settle(reservation=second, cost=Decimal("0.2")).charged == Decimal(0)  # once


def test_dropped_and_expired_holds_give_back_exactly_what_they_held(tenths):
    first = credits_reserve(account_id=tenths, amount=Decimal("0.1"))
    credits_reserve(account_id=tenths, amount=Decimal("0.2"))
    assert hold_drop(first)
    assert assert_books(tenths).reserved == Decimal("0.2")
    assert holds_expire(older_than_seconds=-60, account_id=tenths) == 1
    books = assert_books(tenths)
    assert (books.balance, books.reserved) == (Decimal("0.3"), Decimal(0))
    assert Generation.objects.filter(account_id=tenths).count() == 1  # the expired one stays, marked failed
