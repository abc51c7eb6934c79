"""The two invariants every billing test ends with, and the row counts the "2 rows per request" tests compare."""

from decimal import Decimal

from django.db.models import Sum

from gateway.accounts.models import Account
from gateway.billing.models import IN_PROGRESS, Generation, LedgerEntry

PLACES = Decimal("1e-12")  # the money columns'


def assert_books(account_id) -> Account:
    """balance == the ledger's sum, reserved == the sum of the open holds; returns the account. The sums are taken
    to the money columns' places: SQLite adds its decimals as doubles (0.3 - 0.1 - 0.2 is not 0 there)."""
    account = Account.objects.get(pk=account_id)
    ledger = LedgerEntry.objects.filter(account_id=account_id).aggregate(s=Sum("amount"))["s"] or Decimal(0)
    open_holds = Generation.objects.filter(account_id=account_id, status=IN_PROGRESS)
    assert account.balance == ledger.quantize(PLACES)
    assert account.reserved == (open_holds.aggregate(s=Sum("held"))["s"] or Decimal(0)).quantize(PLACES)
    return account


def rows() -> int:
    """The rows a request can write: generation records and ledger entries."""
    return Generation.objects.count() + LedgerEntry.objects.count()
