"""Usage over time from the generation records (one row per request): the dashboard's series and tables and
GET /activity's daily rows. Every query is bounded by a time window; percentiles are computed in the database
on PostgreSQL and, on SQLite, in Python from at most MAX_LATENCY_SAMPLES values per window."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Aggregate, Count, DecimalField, F, FloatField, Func, IntegerField, Q, QuerySet, Sum, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce, NullIf, TruncDay, TruncHour
from django.utils import timezone

from gateway.billing.models import IN_PROGRESS, Generation

ZERO = Decimal(0)
MONEY = DecimalField(max_digits=24, decimal_places=12)
MAX_LATENCY_SAMPLES = 20_000
FAILED = ("failed",)
RANGES = {"24h": (timedelta(hours=24), "hour"), "7d": (timedelta(days=7), "day"), "30d": (timedelta(days=30), "day")}
DIMENSIONS = {"model": "model", "provider": "provider", "account": "account__name"}


@dataclass(frozen=True)
class Point:
    start: datetime
    requests: int
    errors: int
    tokens: int
    spend: Decimal
    p50_ms: float | None
    p95_ms: float | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


# QuerySet[Any]: the callers group and annotate its rows under names chosen at run time (_totals, DIMENSIONS).
def finished(since: datetime, until: datetime | None = None) -> QuerySet[Any]:
    """Requests that finished (not in progress) created in [since, until)."""
    rows = Generation.objects.filter(created_at__gte=since).exclude(status=IN_PROGRESS)
    return rows.filter(created_at__lt=until) if until is not None else rows


class PercentileCont(Aggregate):
    """PostgreSQL's percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str | Combinable, *, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction))


def _totals() -> dict[str, Func]:
    return {
        "requests": Count("id"),
        "errors": Count("id", filter=Q(status__in=FAILED)),
        "tokens": Coalesce(Sum(F("tokens_input") + F("tokens_output")), Value(0), output_field=IntegerField()),
        "spend": Coalesce(Sum("cost"), Value(ZERO), output_field=MONEY),
    }


def _percentiles(rows: QuerySet[Any]) -> tuple[float | None, float | None]:
    rows = rows.exclude(latency_ms=None)
    if connection.vendor == "postgresql":
        found = rows.aggregate(
            p50=PercentileCont("latency_ms", fraction=0.5), p95=PercentileCont("latency_ms", fraction=0.95)
        )
        return tuple(float(found[name]) if found[name] is not None else None for name in ("p50", "p95"))  # type: ignore[return-value]
    values = sorted(rows.order_by().values_list("latency_ms", flat=True)[:MAX_LATENCY_SAMPLES])
    if not values:
        return None, None
    return float(_rank(values, 0.5)), float(_rank(values, 0.95))


def _rank(values: list[int], fraction: float) -> float:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont)."""
    position = (len(values) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def series(*, window: str, filters: dict[str, Any] | None = None, now: datetime | None = None) -> list[Point]:
    """One point per hour (24h) or day (7d, 30d), oldest first, empty buckets included."""
    span, unit = RANGES[window]
    now = now or timezone.now()
    step = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if unit == "day":
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + step
    start = end - span
    rows = finished(start).filter(**(filters or {}))
    trunc = TruncHour("created_at") if unit == "hour" else TruncDay("created_at")
    grouped = {row["bucket"]: row for row in rows.annotate(bucket=trunc).values("bucket").annotate(**_totals())}
    points, bucket = [], start
    while bucket < end:
        row = grouped.get(bucket)
        p50, p95 = (
            _percentiles(rows.filter(created_at__gte=bucket, created_at__lt=bucket + step)) if row else (None, None)
        )
        points.append(
            Point(
                start=bucket,
                requests=row["requests"] if row else 0,
                errors=row["errors"] if row else 0,
                tokens=row["tokens"] if row else 0,
                spend=row["spend"] if row else ZERO,
                p50_ms=p50,
                p95_ms=p95,
            )
        )
        bucket += step
    return points


def breakdown(
    *, dimension: str, since: datetime, filters: dict[str, Any] | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """The top `limit` values of a dimension by requests since `since`, with totals and latency percentiles."""
    column = DIMENSIONS[dimension]
    rows = finished(since).filter(**(filters or {}))
    top = list(rows.values(name=F(column)).annotate(**_totals()).order_by("-requests", "name")[:limit])
    for item in top:
        item["p50_ms"], item["p95_ms"] = _percentiles(rows.filter(**{column: item["name"]}))
        item["error_rate"] = item["errors"] / item["requests"] if item["requests"] else 0.0
    return top


def activity(
    *, account_id: UUID, since: datetime, until: datetime, filters: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Rows per UTC day, model, provider, API key and workspace of the account's finished requests."""
    rows = finished(since, until).filter(account_id=account_id, **(filters or {}))
    byok = Q(is_byok=True)
    grouped = (
        rows.annotate(day=TruncDay("created_at"), model_id=Coalesce(NullIf("model", Value("")), "requested_model"))
        .values("day", "model_id", "provider", "endpoint_id", "api_key__hash", "workspace_id")
        .annotate(
            requests=Count("id"),
            byok_requests=Count("id", filter=byok),
            prompt_tokens=Coalesce(Sum("tokens_input"), Value(0)),
            completion_tokens=Coalesce(Sum("tokens_output"), Value(0)),
            reasoning_tokens=Coalesce(Sum("tokens_reasoning"), Value(0)),
            cached_tokens=Coalesce(Sum("tokens_cached"), Value(0)),
            usage=Coalesce(Sum("cost"), Value(ZERO), output_field=MONEY),
            byok_usage_inference=Coalesce(Sum("upstream_cost", filter=byok), Value(ZERO), output_field=MONEY),
        )
        .order_by("-day", "model_id", "provider", "api_key__hash", "workspace_id")
    )
    return list(grouped)
