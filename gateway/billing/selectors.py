from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

from django.db.models import DecimalField, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from gateway.accounts.models import ApiKey, LimitReset
from gateway.accounts.usage import KeyUsage
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, KeyUsageDay, LedgerEntry, UsageRollupMark

ZERO = Decimal(0)


@dataclass(frozen=True)
class CreditsSummary:
    total_credits: Decimal
    total_usage: Decimal
    balance: Decimal


def window_starts(now: datetime | None = None) -> dict[str, datetime]:
    """UTC day, week starting Monday, and calendar month."""
    now = now or timezone.now()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return {"daily": day, "weekly": day - timedelta(days=day.weekday()), "monthly": day.replace(day=1)}


def _sum(condition: Q) -> Coalesce:
    return Coalesce(
        Sum("amount", filter=condition), Value(ZERO), output_field=DecimalField(max_digits=24, decimal_places=12)
    )


def credits_summary(*, account_id: UUID) -> CreditsSummary:
    totals = LedgerEntry.objects.filter(account_id=account_id).aggregate(
        credits=_sum(Q(kind__in=[EntryKind.TOPUP, EntryKind.REFUND])),
        usage=_sum(Q(kind=EntryKind.CHARGE)),
        balance=_sum(Q()),
    )
    return CreditsSummary(total_credits=totals["credits"], total_usage=-totals["usage"], balance=totals["balance"])


def key_usage(*, key_id: int) -> KeyUsage:
    starts = window_starts()
    charges = Q(kind=EntryKind.CHARGE)
    byok = Q(is_byok=True)
    aggregates = {"usage": _sum(charges & ~byok), "byok_usage": _sum(charges & byok)}
    for window, start in starts.items():
        aggregates[f"usage_{window}"] = _sum(charges & ~byok & Q(created_at__gte=start))
        aggregates[f"byok_usage_{window}"] = _sum(charges & byok & Q(created_at__gte=start))
    totals = LedgerEntry.objects.filter(api_key_id=key_id).aggregate(**aggregates)
    last = Generation.objects.filter(api_key_id=key_id).order_by("-created_at").values_list("created_at", flat=True)
    return KeyUsage(**{name: -value for name, value in totals.items()}, last_used_at=last.first())


def limit_window_start(limit_reset: str | None) -> datetime | None:
    """Where a key's limit window starts: the current day, week or month; None for a lifetime limit."""
    return window_starts()[limit_reset] if limit_reset in LimitReset.values else None


def key_usage_in_window(*, key: ApiKey) -> Decimal:
    """What counts against the key's limit in its current reset window (lifetime when none): the finished days
    before the rollup mark from KeyUsageDay, the charges since from the ledger (as HOLD_WITHIN_LIMIT_SQL)."""
    start = limit_window_start(key.limit_reset)
    mark = UsageRollupMark.objects.filter(pk=1).values_list("rolled_until", flat=True).first()
    total = ZERO
    if mark is not None and (start is None or start < mark):
        days = KeyUsageDay.objects.filter(api_key_id=key.pk, day__lt=mark.date())
        if start is not None:
            days = days.filter(day__gte=start.date())
        rolled = days.aggregate(spent=_sum_of("spent"), byok=_sum_of("spent_byok"))
        total = rolled["spent"] + (rolled["byok"] if key.include_byok_in_limit else ZERO)
        start = mark
    query = Q(api_key_id=key.pk, kind=EntryKind.CHARGE)
    if not key.include_byok_in_limit:
        query &= Q(is_byok=False)
    if start is not None:
        query &= Q(created_at__gte=start)
    return total - LedgerEntry.objects.filter(query).aggregate(total=_sum(Q()))["total"]


def key_open_holds(*, key_id: int) -> Decimal:
    """What the key's requests in flight hold (counted against its limit with what it already spent)."""
    return Generation.objects.filter(api_key_id=key_id, status=IN_PROGRESS).aggregate(total=_sum_of("held"))["total"]


def _sum_of(column: str) -> Coalesce:
    return Coalesce(Sum(column), Value(ZERO), output_field=DecimalField(max_digits=24, decimal_places=12))
