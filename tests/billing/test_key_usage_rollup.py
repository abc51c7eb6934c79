"""Key limits read finished days from KeyUsageDay (summed by the periodic job) and only the charges since the rollup
mark from the ledger: the same usage as summing every ledger row, for every window and with or without BYOK, before
and after the job runs; the job sums each day once; the hold statement (PostgreSQL) admits and refuses exactly as
before. Before this, every hold of a limited key summed each of its charges in the window: 59 ms of PostgreSQL per
request for a key with 200,000 charges in its month."""

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from gateway.accounts.models import ApiKey
from gateway.billing.models import EntryKind, KeyUsageDay, LedgerEntry, UsageRollupMark
from gateway.billing.rollups import key_usage_roll_up
from gateway.billing.selectors import key_usage_in_window
from gateway.billing.services import MSG_KEY_LIMIT, credits_reserve
from gateway.errors import PaymentRequired

WINDOWS = [None, "daily", "weekly", "monthly"]


def charge(persona, key: ApiKey, amount: str, *, days_ago: int, byok: bool = False) -> None:
    """A charge as a settlement writes it, dated `days_ago` days back (at noon UTC, or now for today)."""
    entry = LedgerEntry.objects.create(
        account_id=persona.account_id, kind=EntryKind.CHARGE, amount=-Decimal(amount), api_key=key, is_byok=byok
    )
    if days_ago:
        noon = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=days_ago)
        LedgerEntry.objects.filter(pk=entry.pk).update(created_at=noon)


@pytest.fixture
def history(alice):
    """Charges over the last 40 days, BYOK fees among them, and today's."""
    key = alice.provisioned.inference_key.key
    for days_ago in (40, 35, 9, 3, 1, 1, 0):
        charge(alice, key, "0.5", days_ago=days_ago)
        charge(alice, key, "0.01", days_ago=days_ago, byok=True)
    return key


def usage_by_window(key: ApiKey) -> dict:
    found = {}
    for reset in WINDOWS:
        for byok in (False, True):
            ApiKey.objects.filter(pk=key.pk).update(limit=Decimal("100"), limit_reset=reset, include_byok_in_limit=byok)
            found[(reset, byok)] = key_usage_in_window(key=ApiKey.objects.get(pk=key.pk))
    return found


def test_usage_is_the_same_before_and_after_the_rollup_in_every_window(history):
    before = usage_by_window(history)
    assert before[(None, False)] == Decimal("3.5") and before[(None, True)] == Decimal("3.57")
    days = key_usage_roll_up()
    assert days >= 39  # from the first charge's day to yesterday (the margin may keep yesterday back at 00:0x)
    assert KeyUsageDay.objects.filter(api_key=history).count() >= 5
    assert usage_by_window(history) == before
    # A charge after the run (today, after the mark) counts at once
    LedgerEntry.objects.create(
        account_id=history.account_id, kind=EntryKind.CHARGE, amount=Decimal("-0.25"), api_key=history
    )
    after = usage_by_window(history)
    assert all(after[window] == before[window] + Decimal("0.25") for window in before)


def test_each_day_is_summed_once(history):
    key_usage_roll_up()
    rows = {row.day: (row.spent, row.spent_byok) for row in KeyUsageDay.objects.filter(api_key=history)}
    assert key_usage_roll_up() == 0  # nothing new to sum: the mark is past every finished day
    assert {row.day: (row.spent, row.spent_byok) for row in KeyUsageDay.objects.filter(api_key=history)} == rows
    yesterday = (timezone.now() - timedelta(days=1)).date()
    if UsageRollupMark.objects.get().rolled_until.date() > yesterday:
        assert rows[yesterday] == (Decimal("1.0"), Decimal("0.02"))  # two charges and two fees that day
    # The periodic command runs it beside the stale-hold sweep
    out = StringIO()
    call_command("release_stale_reservations", stdout=out)
    assert "summed 0 finished days" in out.getvalue()


def test_a_days_sum_moves_with_the_mark_in_one_transaction(history):
    """Stopped after two days, the usage is still exact: days before the mark from the sums, the rest from the
    ledger."""
    first = LedgerEntry.objects.filter(kind=EntryKind.CHARGE).order_by("created_at").first()
    assert first is not None
    start = first.created_at.replace(hour=0, minute=0, second=0, microsecond=0)
    before = usage_by_window(history)
    key_usage_roll_up(now=start + timedelta(days=2, hours=1))
    assert UsageRollupMark.objects.get().rolled_until == start + timedelta(days=2)
    assert usage_by_window(history) == before


def test_the_hold_admits_and_refuses_at_the_limit_as_before(alice, history):
    ApiKey.objects.filter(pk=history.pk).update(limit=Decimal("5"), limit_reset=None, include_byok_in_limit=True)
    spent = key_usage_in_window(key=ApiKey.objects.get(pk=history.pk))
    key_usage_roll_up()
    left = Decimal("5") - spent
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=left + Decimal("0.01"), api_key_id=history.pk)
    assert caught.value.message == MSG_KEY_LIMIT
    assert Decimal(str(caught.value.metadata["usage"])) == spent
    # What the hold read for the finished days is the sums, not the ledger: a sum changed by hand shows
    KeyUsageDay.objects.filter(api_key=history, day=timezone.now().date() - timedelta(days=35)).update(
        spent=Decimal("1.5")
    )
    with pytest.raises(PaymentRequired) as caught:
        credits_reserve(account_id=alice.account_id, amount=left, api_key_id=history.pk)
    assert Decimal(str(caught.value.metadata["usage"])) == spent + 1
    KeyUsageDay.objects.filter(api_key=history, day=timezone.now().date() - timedelta(days=35)).update(
        spent=Decimal("0.5")
    )
    credits_reserve(account_id=alice.account_id, amount=left, api_key_id=history.pk)
