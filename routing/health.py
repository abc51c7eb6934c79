"""Endpoint health and performance from recent attempts, kept in the shared cache (Redis when
REDIS_URL is set, so every worker and instance sees the same picture; local memory otherwise, and while
Redis is unavailable: see gateway/cache.py).

Health: an endpoint whose last FAILURES_TO_TRIP attempts within HEALTH_WINDOW seconds all failed on the
provider's side is unhealthy; it is tried only after the healthy ones, and recovers when those failures
age out of the window or an attempt succeeds. Percentiles (latency, time to first token, throughput)
come from the samples of the last STATS_WINDOW seconds."""

import hashlib
import time
from dataclasses import dataclass

from django.core.cache import cache

from gateway.cache import list_push, lists_get

HEALTH_WINDOW = 30.0
STATS_WINDOW = 300.0
FAILURES_TO_TRIP = 2
MAX_SAMPLES = 200
PERCENTILES = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p99": 0.99}


def now() -> float:
    return time.time()


@dataclass(frozen=True)
class EndpointStats:
    healthy: bool = True
    samples: int = 0
    latency: dict | None = None  # seconds, by percentile
    ttft: dict | None = None  # seconds
    throughput: dict | None = None  # output tokens per second


def _key(endpoint_id: int) -> str:
    return f"routing:samples:{endpoint_id}"


def health_record(
    *,
    endpoint_id: int,
    ok: bool,
    latency_s: float | None = None,
    ttft_s: float | None = None,
    throughput: float | None = None,
) -> None:
    """One attempt's outcome, appended atomically (concurrent writers lose nothing); the newest MAX_SAMPLES
    are kept, and samples older than STATS_WINDOW are ignored when read."""
    list_push(
        key=_key(endpoint_id),
        item=(now(), ok, latency_s, ttft_s, throughput),
        max_items=MAX_SAMPLES,
        timeout=int(STATS_WINDOW) + 60,
    )


def health_reset(*, endpoint_id: int) -> None:
    cache.delete(_key(endpoint_id))


def _percentiles(values: list[float]) -> dict | None:
    if not values:
        return None
    ordered = sorted(values)
    return {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for name, q in PERCENTILES.items()}


def _stats(samples: list) -> EndpointStats:
    current = now()
    recent = [s for s in samples if s[0] >= current - HEALTH_WINDOW]
    last = recent[-FAILURES_TO_TRIP:]
    healthy = not (len(last) == FAILURES_TO_TRIP and not any(s[1] for s in last))
    window = [s for s in samples if s[0] >= current - STATS_WINDOW and s[1]]
    return EndpointStats(
        healthy=healthy,
        samples=len(window),
        latency=_percentiles([s[2] for s in window if s[2] is not None]),
        ttft=_percentiles([s[3] for s in window if s[3] is not None]),
        throughput=_percentiles([s[4] for s in window if s[4] is not None]),
    )


def endpoint_stats(endpoint_ids: list[int]) -> dict[int, EndpointStats]:
    found = lists_get(keys=[_key(i) for i in endpoint_ids])
    return {i: _stats(found.get(_key(i)) or []) for i in endpoint_ids}


STICKY_TTL = 300


def sticky_key(*, account_id, session_id: str, model: str) -> str:
    digest = hashlib.sha256(f"{account_id}:{model}:{session_id}".encode()).hexdigest()[:40]
    return f"routing:sticky:{digest}"


def sticky_get(*, key: str) -> int | None:
    return cache.get(key)


def sticky_set(*, key: str, endpoint_id: int) -> None:
    cache.set(key, endpoint_id, timeout=STICKY_TTL)
