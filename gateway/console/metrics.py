"""Prometheus metrics: what each process counts, summed across gunicorn workers at scrape time.

Under gunicorn, gateway/gunicorn_conf.py points PROMETHEUS_MULTIPROC_DIR at an emptied directory before the
workers start; each worker then writes its values to memory-mapped files there, and GET /metrics reads all of
them (prometheus_client's multiprocess mode: counters and histograms summed, the open-stream gauge summed over
live workers). Without it (tests, runserver) the values are this process's own.

Access: a scrape with `Authorization: Bearer <METRICS_TOKEN>` (when set), or from an address in
METRICS_ALLOWED_NETWORKS (loopback by default); anything else is 404, so the endpoint is not advertised."""

import hmac
import ipaddress
import os
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

from gateway.billing.generations import GenerationRecord

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter("gateway_http_requests", "HTTP requests answered, by route and status", ["route", "status"])
REQUEST_SECONDS = Histogram(
    "gateway_http_request_duration_seconds",
    "Time from the request to the end of the response (a stream's last byte), by route",
    ["route"],
    buckets=LATENCY_BUCKETS,
)
ATTEMPTS = Counter(
    "gateway_upstream_attempts",
    "Upstream attempts by provider and outcome (ok or the error type)",
    ["provider", "outcome"],
)
TTFT_SECONDS = Histogram(
    "gateway_time_to_first_token_seconds",
    "Time to the first token of served requests",
    ["provider"],
    buckets=LATENCY_BUCKETS,
)
GENERATION_SECONDS = Histogram(
    "gateway_generation_latency_seconds", "Served requests' latency as recorded", ["provider"], buckets=LATENCY_BUCKETS
)
TOKENS = Counter("gateway_tokens", "Tokens of settled requests", ["provider", "model", "kind"])
SPEND = Counter("gateway_spend_usd", "Credits charged (USD) by settled requests", ["provider", "byok"])
GENERATIONS = Counter("gateway_generations", "Settled requests by provider and status", ["provider", "status"])
OPEN_STREAMS = Gauge("gateway_open_streams", "Streamed responses being sent", multiprocess_mode="livesum")

_CHILDREN: dict[tuple[Any, tuple[str, ...]], Any] = {}  # (metric, label values) -> its child
MAX_CHILDREN = 4096  # forgotten all at once past this (a client-chosen model name is a label value)


def labelled(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, remembered: prometheus_client validates the values and takes a lock to find the
    child each time, some ten times a request."""
    key = (metric, values)
    child = _CHILDREN.get(key)
    if child is None:
        if len(_CHILDREN) >= MAX_CHILDREN:
            _CHILDREN.clear()
        child = _CHILDREN[key] = metric.labels(*values)
    return child


def record_settled(record: GenerationRecord, charged: Decimal | None) -> None:
    """Counts a settled request (billing's settlement observer); never raises into settlement."""
    try:
        provider = record.provider or "none"
        for attempt in record.provider_responses:
            outcome = "ok" if attempt.error_type is None and attempt.status == 200 else attempt.error_type or "error"
            labelled(ATTEMPTS, attempt.provider_name or "unknown", outcome).inc()
        labelled(GENERATIONS, provider, record.status).inc()
        if record.ttft_ms is not None:
            labelled(TTFT_SECONDS, provider).observe(record.ttft_ms / 1000)
        if record.latency_ms is not None:
            labelled(GENERATION_SECONDS, provider).observe(record.latency_ms / 1000)
        model = record.model or record.requested_model or "none"
        for kind, count in (
            ("input", record.tokens_input),
            ("output", record.tokens_output),
            ("reasoning", record.tokens_reasoning),
            ("cached", record.tokens_cached),
        ):
            if count:
                labelled(TOKENS, provider, model, kind).inc(count)
        if charged:
            labelled(SPEND, provider, "true" if record.is_byok else "false").inc(float(charged))
    except Exception:  # noqa: BLE001, S110  # metrics never fail a request's billing
        pass


class CreditHoldsCollector:
    """Open credit holds (requests in flight), read from the database at scrape time: the same in every worker."""

    def collect(self) -> list[GaugeMetricFamily]:
        from django.db.models import Count, Sum

        from gateway.billing.models import IN_PROGRESS, Generation

        found = Generation.objects.filter(status=IN_PROGRESS).aggregate(count=Count("id"), held=Sum("held"))
        count = GaugeMetricFamily("gateway_credit_holds_open", "Credit holds open (requests in flight)")
        count.add_metric([], found["count"] or 0)
        held = GaugeMetricFamily("gateway_credit_holds_usd", "Credits held by open holds (USD)")
        held.add_metric([], float(found["held"] or 0))
        return [count, held]


def _allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks())


_parsed: tuple[str, list[IPNetwork]] | None = None


def _networks() -> list[IPNetwork]:
    global _parsed
    raw = ",".join(settings.METRICS_ALLOWED_NETWORKS)
    if _parsed is None or _parsed[0] != raw:
        _parsed = (raw, [ipaddress.ip_network(item.strip(), strict=False) for item in raw.split(",") if item.strip()])
    return _parsed[1]


_HOLDS = CollectorRegistry()  # collected at scrape time only (a database query)
_HOLDS.register(CreditHoldsCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method != "GET" or not _allowed(request):
        raise Http404
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # every worker's files, summed
    else:
        registry = REGISTRY  # this process alone
    return HttpResponse(generate_latest(registry) + generate_latest(_HOLDS), content_type=CONTENT_TYPE_LATEST)
