"""Endpoint health and performance from recent attempts, kept in the shared cache (Redis when
REDIS_URL is set, so every worker and instance sees the same picture; process-local memory otherwise, and
while Redis is unavailable: see gateway/cache.py).

Health: an endpoint whose last FAILURES_TO_TRIP attempts within HEALTH_WINDOW seconds all failed on the
provider's side is unhealthy; it is tried only after the healthy ones, and recovers when those failures
age out of the window or an attempt succeeds. Percentiles (latency, time to first token, throughput)
come from the successful attempts of the last STATS_WINDOW seconds (at most MAX_SAMPLES of them).

Two exact structures per endpoint, so that nothing is read to be written back: a list of the last
FAILURES_TO_TRIP outcomes and a list of the last MAX_SAMPLES successful samples, each appended with RPUSH
and capped with LTRIM. Items are short strings ("<time> <ok>", "<time> <latency> <ttft> <throughput>").
In Redis, one attempt's writes are one script call (one round trip, atomic), and the reads of every
candidate endpoint of a request another, which computes the percentiles inside Redis and answers a few
numbers per endpoint: parsing 200 samples per endpoint per request in Python cost about 2 ms of CPU."""

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.core.cache import cache, caches
from django.core.cache.backends.base import BaseCache
from redis.commands.core import Script

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


# KEYS: the lists to append to; ARGV: seconds to keep them, then per list its item and its cap.
PUSH_LUA = """
for i, key in ipairs(KEYS) do
  redis.call('RPUSH', key, ARGV[2 * i])
  redis.call('LTRIM', key, -tonumber(ARGV[2 * i + 1]), -1)
  redis.call('EXPIRE', key, ARGV[1])
end
"""

# KEYS: per endpoint its outcomes list then its samples list; ARGV: now, STATS_WINDOW, then the quantiles.
# Per endpoint: {outcomes as stored, samples in the window, then per quantile the latency's, then the ttft's,
# then the throughput's ("-" where there is none)}. Quantile q of n sorted values is the (floor(q*n)+1)-th,
# as in _percentiles; numbers go out with 17 digits, so they read back exactly.
STATS_LUA = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local result = {}
for i = 1, #KEYS, 2 do
  local columns, count = {{}, {}, {}}, 0
  for _, item in ipairs(redis.call('LRANGE', KEYS[i + 1], 0, -1)) do
    local at, a, b, c = string.match(item, '^(%S+) (%S+) (%S+) (%S+)$')
    if at and tonumber(at) >= now - window then
      count = count + 1
      local values = {tonumber(a), tonumber(b), tonumber(c)}
      for k = 1, 3 do
        if values[k] then table.insert(columns[k], values[k]) end
      end
    end
  end
  local entry = {redis.call('LRANGE', KEYS[i], 0, -1), tostring(count)}
  for k = 1, 3 do
    local column = columns[k]
    table.sort(column)
    for q = 3, #ARGV do
      local n = #column
      if n == 0 then
        table.insert(entry, '-')
      else
        table.insert(entry, string.format('%.17g', column[math.min(n, math.floor(tonumber(ARGV[q]) * n) + 1)]))
      end
    end
  end
  table.insert(result, entry)
end
return result
"""
_scripts: dict[str, Script] = {}


def _run(backend: ResilientRedisCache, source: str, keys: list[str], args: list):
    client = backend._cache.get_client(None, write=True)
    script = _scripts.get(source) or _scripts.setdefault(source, client.register_script(source))
    return script(keys=[backend.make_key(key) for key in keys], args=args, client=client)


def _redis_push(backend: ResilientRedisCache, appends: list[tuple[str, str, int]]) -> None:
    args: list = [KEPT_SECONDS]
    for _, item, cap in appends:
        args += [item, cap]
    _run(backend, PUSH_LUA, [key for key, _, _ in appends], args)


def _redis_stats(backend: ResilientRedisCache, endpoint_ids: list[int], current: float) -> dict[int, EndpointStats]:
    keys = [key for i in endpoint_ids for key in (_outcomes_key(i), _samples_key(i))]
    answer = _run(backend, STATS_LUA, keys, [repr(current), STATS_WINDOW, *PERCENTILES.values()])
    width = len(PERCENTILES)
    found = {}
    for endpoint_id, (outcomes, count, *values) in zip(endpoint_ids, answer, strict=True):
        columns = [values[k * width : (k + 1) * width] for k in range(3)]
        latency, ttft, throughput = (
            None if column[0] == b"-" else dict(zip(PERCENTILES, map(float, column), strict=True)) for column in columns
        )
        found[endpoint_id] = EndpointStats(
            healthy=_healthy([item.decode() for item in outcomes], current),
            samples=int(count),
            latency=latency,
            ttft=ttft,
            throughput=throughput,
        )
    return found


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


def _healthy(outcomes: list[str], current: float) -> bool:
    recent = [item for item in outcomes if float(item.split(" ", 1)[0]) >= current - HEALTH_WINDOW]
    return not (len(recent) == FAILURES_TO_TRIP and all(item.endswith(" 0") for item in recent))


def _local_stats(found: dict[str, list], endpoint_id: int, current: float) -> EndpointStats:
    latency: list[float] = []
    ttft: list[float] = []
    throughput: list[float] = []
    count = 0
    for sample in found.get(_samples_key(endpoint_id)) or []:
        at, *values = sample.split(" ")
        if float(at) < current - STATS_WINDOW:
            continue
        count += 1
        for column, value in zip((latency, ttft, throughput), values, strict=True):
            if value != "-":
                column.append(float(value))
    return EndpointStats(
        healthy=_healthy(found.get(_outcomes_key(endpoint_id)) or [], current),
        samples=count,
        latency=_percentiles(latency),
        ttft=_percentiles(ttft),
        throughput=_percentiles(throughput),
    )


def endpoint_stats(endpoint_ids: list[int]) -> dict[int, EndpointStats]:
    """The stats of every endpoint, read in one round trip."""
    current = now()

    def local(backend: BaseCache, extras: LocalExtras | None) -> dict[int, EndpointStats]:
        keys = [key for i in endpoint_ids for key in (_outcomes_key(i), _samples_key(i))]
        found = lists_get(keys=keys, backend=backend)
        return {i: _local_stats(found, i, current) for i in endpoint_ids}

    return _shared_or_local(lambda backend: _redis_stats(backend, endpoint_ids, current), local)


STICKY_TTL = 300


def sticky_key(*, account_id, session_id: str, model: str) -> str:
    digest = hashlib.sha256(f"{account_id}:{model}:{session_id}".encode()).hexdigest()[:40]
    return f"routing:sticky:{digest}"


def sticky_get(*, key: str) -> int | None:
    return cache.get(key)


def sticky_set(*, key: str, endpoint_id: int) -> None:
    cache.set(key, endpoint_id, timeout=STICKY_TTL)
