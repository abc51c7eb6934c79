"""The admin dashboard: requests, spend, tokens, error rate and p50/p95 latency over time (filterable by model,
provider and account), the top models, providers and accounts, and the current health of each endpoint."""

from typing import Any
from uuid import UUID

from django.contrib import admin
from django.http import HttpRequest, QueryDict
from django.template.response import TemplateResponse

from gateway.console import analytics
from gateway.console.charts import bar_chart
from routing.health import endpoint_stats
from routing.selectors import routable_endpoints

MAX_HEALTH_ROWS = 500
FILTER_MAX_CHARS = 256


def _filters(params: QueryDict) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The query's filters as ORM lookups, as shown back in the form, and what was refused (with why)."""
    lookups: dict[str, str] = {}
    shown: dict[str, str] = {}
    errors: list[str] = []
    for name in ("model", "provider"):
        value = params.get(name, "").strip()
        if len(value) > FILTER_MAX_CHARS:
            errors.append(f"{name}: at most {FILTER_MAX_CHARS} characters")
        elif any(ord(char) < 32 or ord(char) == 127 for char in value):
            errors.append(f"{name}: control characters are not allowed")
        elif value:
            lookups[name], shown[name] = value, value
    account = params.get("account", "").strip()
    if account:
        try:
            lookups["account_id"] = shown["account"] = str(UUID(account))
        except ValueError:
            errors.append("account: not an account id (UUID)")
    return lookups, shown, errors


def _health_rows() -> list[dict[str, Any]]:
    endpoints = list(routable_endpoints().order_by("model_id", "provider__slug")[:MAX_HEALTH_ROWS])
    stats = endpoint_stats([endpoint.pk for endpoint in endpoints])
    rows = []
    for endpoint in endpoints:
        found = stats[endpoint.pk]
        latency = found.latency or {}
        rows.append(
            {
                "model": endpoint.model_id,
                "provider": endpoint.provider.slug,
                "id": endpoint.pk,
                "healthy": found.healthy,
                "samples": found.samples,
                "p50_ms": round(latency["p50"] * 1000) if latency.get("p50") is not None else None,
                "p90_ms": round(latency["p90"] * 1000) if latency.get("p90") is not None else None,
            }
        )
    return rows


def dashboard(request: HttpRequest) -> TemplateResponse:
    window = request.GET.get("range", "24h")
    errors = []
    if window not in analytics.RANGES:
        errors.append(f"range: one of {', '.join(analytics.RANGES)}")
        window = "24h"
    lookups, shown, refused = _filters(request.GET)
    errors.extend(refused)
    points = analytics.series(window=window, filters=lookups)
    hourly = analytics.RANGES[window][1] == "hour"
    labels = [point.start.strftime("%H:%M" if hourly else "%m-%d") for point in points]
    charts = [
        bar_chart(title="Requests", labels=labels, series=[("requests", [p.requests for p in points], "#417690")]),
        bar_chart(
            title="Spend", labels=labels, series=[("spend", [float(p.spend) for p in points], "#79aec8")], unit=""
        ),
        bar_chart(title="Tokens", labels=labels, series=[("tokens", [p.tokens for p in points], "#5b80b2")]),
        bar_chart(
            title="Error rate",
            labels=labels,
            series=[("errors", [p.error_rate * 100 for p in points], "#ba2121")],
            unit="%",
        ),
        bar_chart(
            title="Latency",
            labels=labels,
            series=[("p50", [p.p50_ms for p in points], "#417690"), ("p95", [p.p95_ms for p in points], "#e09b2d")],
            unit=" ms",
        ),
    ]
    since = points[0].start if points else None
    tables = {
        dimension: analytics.breakdown(dimension=dimension, since=since, filters=lookups) if since else []
        for dimension in analytics.DIMENSIONS
    }
    totals = {
        "requests": sum(p.requests for p in points),
        "errors": sum(p.errors for p in points),
        "tokens": sum(p.tokens for p in points),
        "spend": sum((p.spend for p in points), analytics.ZERO),
    }
    context = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "window": window,
        "windows": list(analytics.RANGES),
        "filters": shown,
        "errors": errors,
        "charts": zip(["Requests", "Spend (USD)", "Tokens", "Error rate", "Latency p50 / p95"], charts, strict=True),
        "tables": tables,
        "totals": totals,
        "health": _health_rows(),
    }
    return TemplateResponse(request, "admin/console/dashboard.html", context)
