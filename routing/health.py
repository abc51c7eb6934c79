"""Endpoint health and performance from recent attempts, kept in the shared cache (Redis when
REDIS_URL is set, so every worker and instance sees the same picture; process-local memory otherwise, and
while Redis is unavailable: see gateway/cache.py).

Health: an endpoint whose last FAILURES_TO_TRIP attempts within HEALTH_WINDOW seconds all failed on the
provider's side is unhealthy; it is tried only after the healthy ones, and recovers when those failures
age out of the window or an attempt succeeds. Percentiles (latency, time to first token, throughput)
come from the successful attempts of the last STATS_WINDOW seconds (at most MAX_SAMPLES of them).

Two exact structures per endpoint, so that nothing is read to be written back: a list of the last
FAILURES_TO_TRIP outcomes and a list of the last MAX_SAMPLES successful samples, each appended with RPUSH
and capped with LTRIM. All of one attempt's writes go to Redis in one pipeline (one round trip), and the
reads of every candidate endpoint of a request in another. Items are short strings ("<time> <ok>",
"<time> <latency> <ttft> <throughput>") rather than JSON, so reading 200 samples costs little."""

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.core.cache import cache, caches
from django.core.cache.backends.base import BaseCache

from gateway.cache import LocalExtras, ResilientRedisCache, list_push, lists_get

HEALTH_WINDOW = 30.0
STATS_WINDOW = 300.0
FAILURES_TO_TRIP = 2
MAX_SAMPLES = 200
PERCENTILES = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p99": 0.99}
KEPT_SECONDS = int(STATS_WINDOW) + 60  # a key outlives its newest item by the longest window, then goes


def now() -> float:
    return time.time()


@dataclass(frozen=True)
class EndpointStats:
    healthy: bool = True
    samples: int = 0
    latency: dict | None = None  # seconds, by percentile
    ttft: dict | None = None  # seconds
    throughput: dict | None = None  # output tokens per second


def _outcomes_key(endpoint_id: int) -> str:
    return f"routing:health:{endpoint_id}:outcomes"


def _samples_key(endpoint_id: int) -> str:
    return f"routing:health:{endpoint_id}:samples"


def _number(value: float | None) -> str:
    return "-" if value is None else repr(float(value))


def _appends(
    endpoint_id: int, ok: bool, latency_s: float | None, ttft_s: float | None, throughput: float | None
) -> list[tuple[str, str, int]]:
    """(key, item, cap) of the lists one attempt appends to."""
    at = repr(now())
    appends = [(_outcomes_key(endpoint_id), f"{at} {int(ok)}", FAILURES_TO_TRIP)]
    if ok and (latency_s, ttft_s, throughput) != (None, None, None):
        sample = f"{at} {_number(latency_s)} {_number(ttft_s)} {_number(throughput)}"
        appends.append((_samples_key(endpoint_id), sample, MAX_SAMPLES))
    return appends


def _redis_push(backend: ResilientRedisCache, appends: list[tuple[str, str, int]]) -> None:
    """All the appends in one pipeline: no MULTI needed, each RPUSH+LTRIM pair keeps its list exact on its own."""
    pipeline = backend._cache.get_client(None, write=True).pipeline(transaction=False)
    for key, item, cap in appends:
        made = backend.make_key(key)
        pipeline.rpush(made, item)
        pipeline.ltrim(made, -cap, -1)
        pipeline.expire(made, KEPT_SECONDS)
    pipeline.execute()


def _redis_read(backend: ResilientRedisCache, keys: list[str]) -> dict[str, list[str]]:
    pipeline = backend._cache.get_client(None).pipeline(transaction=False)
    for key in keys:
        pipeline.lrange(backend.make_key(key), 0, -1)
    return {key: [item.decode() for item in items] for key, items in zip(keys, pipeline.execute(), strict=True)}


def _local_push(backend: BaseCache, extras: LocalExtras | None, appends: list[tuple[str, str, int]]) -> None:
    for key, item, cap in appends:
        if extras is None:
            list_push(key=key, item=item, max_items=cap, timeout=KEPT_SECONDS, backend=backend)
        else:
            extras.list_push(backend, key, item, max_items=cap, timeout=KEPT_SECONDS)


def _shared_or_local(redis_op: Callable, local_op: Callable):
    """redis_op(backend) on the shared Redis cache; local_op(backend, extras) on process-local memory (the
    local-memory cache, or the Redis cache's own fallback while Redis is unavailable)."""
    backend = caches["default"]
    if isinstance(backend, ResilientRedisCache):
        shared = backend.shared
        return backend._resilient(lambda: redis_op(backend), lambda: local_op(shared.local, shared.extras))
    return local_op(backend, None)


def health_record(
    *,
    endpoint_id: int,
    ok: bool,
    latency_s: float | None = None,
    ttft_s: float | None = None,
    throughput: float | None = None,
) -> None:
    """One attempt's outcome, appended atomically (concurrent writers lose nothing) in one round trip; the
    newest FAILURES_TO_TRIP outcomes and MAX_SAMPLES successful samples are kept, older ones age out."""
    appends = _appends(endpoint_id, ok, latency_s, ttft_s, throughput)
    _shared_or_local(
        lambda backend: _redis_push(backend, appends), lambda local, extras: _local_push(local, extras, appends)
    )


def health_reset(*, endpoint_id: int) -> None:
    cache.delete_many([_outcomes_key(endpoint_id), _samples_key(endpoint_id)])


def _percentiles(values: list[float]) -> dict | None:
    if not values:
        return None
    ordered = sorted(values)
    return {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for name, q in PERCENTILES.items()}


def _stats(outcomes: list[str], samples: list[str], current: float) -> EndpointStats:
    recent = [item for item in outcomes if float(item.split(" ", 1)[0]) >= current - HEALTH_WINDOW]
    healthy = not (len(recent) == FAILURES_TO_TRIP and all(item.endswith(" 0") for item in recent))
    latency: list[float] = []
    ttft: list[float] = []
    throughput: list[float] = []
    count = 0
    for sample in samples:
        at, *values = sample.split(" ")
        if float(at) < current - STATS_WINDOW:
            continue
        count += 1
        for column, value in zip((latency, ttft, throughput), values, strict=True):
            if value != "-":
                column.append(float(value))
    return EndpointStats(
        healthy=healthy,
        samples=count,
        latency=_percentiles(latency),
        ttft=_percentiles(ttft),
        throughput=_percentiles(throughput),
    )


def endpoint_stats(endpoint_ids: list[int]) -> dict[int, EndpointStats]:
    """The stats of every endpoint, read in one round trip."""
    keys = [key for i in endpoint_ids for key in (_outcomes_key(i), _samples_key(i))]
    found = _shared_or_local(
        lambda backend: _redis_read(backend, keys), lambda local, extras: lists_get(keys=keys, backend=local)
    )
    current = now()
    return {
        i: _stats(found.get(_outcomes_key(i)) or [], found.get(_samples_key(i)) or [], current) for i in endpoint_ids
    }


STICKY_TTL = 300


def sticky_key(*, account_id, session_id: str, model: str) -> str:
    digest = hashlib.sha256(f"{account_id}:{model}:{session_id}".encode()).hexdigest()[:40]
    return f"routing:sticky:{digest}"


def sticky_get(*, key: str) -> int | None:
    return cache.get(key)


def sticky_set(*, key: str, endpoint_id: int) -> None:
    cache.set(key, endpoint_id, timeout=STICKY_TTL)
