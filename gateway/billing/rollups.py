"""The daily rollup of the keys' charges (KeyUsageDay): run from the same cron job as the stale-hold sweep."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import DecimalField, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from gateway.billing.models import EntryKind, KeyUsageDay, LedgerEntry, UsageRollupMark

_MONEY_FIELD = DecimalField(max_digits=24, decimal_places=12)


# A day is summed once it is this far behind: a settlement stamps its charge with its statement's start, so one still
# committing at midnight lands on the day before; none takes minutes.
ROLLUP_MARGIN = timedelta(minutes=10)


def key_usage_roll_up(*, now: datetime | None = None) -> int:
    """Sum each finished UTC day's charges per key into KeyUsageDay and move the rollup mark past it, a day per
    transaction (a key limit's check then reads a row per day instead of a row per request). From the day of the
    first charge on the first run; run it from the same cron job as the stale-hold sweep. Returns the days summed."""
    last = (now or timezone.now()) - ROLLUP_MARGIN
    today = last.replace(hour=0, minute=0, second=0, microsecond=0)
    days = 0
    while True:
        with transaction.atomic():
            mark = UsageRollupMark.objects.select_for_update().filter(pk=1).first()
            start = mark.rolled_until if mark else _first_charge_day()
            if start is None or start >= today:
                return days
            end = start + timedelta(days=1)
            charges = Q(kind=EntryKind.CHARGE, created_at__gte=start, created_at__lt=end, api_key__isnull=False)
            sums = (
                LedgerEntry.objects.filter(charges)
                .values("api_key_id")
                .annotate(
                    spent=Coalesce(
                        Sum("amount", filter=Q(is_byok=False)), Value(Decimal(0)), output_field=_MONEY_FIELD
                    ),
                    byok=Coalesce(Sum("amount", filter=Q(is_byok=True)), Value(Decimal(0)), output_field=_MONEY_FIELD),
                )
            )
            KeyUsageDay.objects.bulk_create(
                KeyUsageDay(
                    api_key_id=row["api_key_id"], day=start.date(), spent=-row["spent"], spent_byok=-row["byok"]
                )
                for row in sums
            )
            UsageRollupMark.objects.update_or_create(pk=1, defaults={"rolled_until": end})
            days += 1


def _first_charge_day() -> datetime | None:
    first = (
        LedgerEntry.objects.filter(kind=EntryKind.CHARGE).order_by("created_at").values_list("created_at", flat=True)
    )
    found = first.first()
    return found.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) if found else None
