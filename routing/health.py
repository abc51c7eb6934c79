"""Endpoint health and performance from recent attempts, kept in the shared cache (Redis when
REDIS_URL is set, so every worker and instance sees the same picture; process-local memory otherwise, and
while Redis is unavailable: see gateway/cache.py).

Health: an endpoint whose last FAILURES_TO_TRIP attempts within HEALTH_WINDOW seconds all failed on the
provider's side is unhealthy; it is tried only after the healthy ones, and recovers when those failures
age out of the window or an attempt succeeds. Percentiles (latency, time to first token, throughput)
come from the successful attempts of the last STATS_WINDOW seconds (at most MAX_SAMPLES of them).

Exact structures, so that nothing is read to be written back. The last FAILURES_TO_TRIP outcomes are a list
("<time> <ok>" items, RPUSH + LTRIM). In Redis the successful samples are a list of "<id> <time>" (oldest
first, at most MAX_SAMPLES) and one sorted set per measure (latency, ttft, throughput) of id -> value, so a
percentile is one ZRANGE by rank; samples leave the sets when they leave the list (capped on write, aged
out on read). One attempt's writes are one script call (atomic, one round trip), and a request's reads of
all its candidate endpoints another, answering a few numbers per endpoint. Reading 200 samples per
endpoint per request and sorting them cost about 1.7 ms of CPU in Python, or 1 ms in Redis in Lua.
Process-local memory keeps the samples as a list of "<time> <latency> <ttft> <throughput>" items.

With HEALTH_WRITE_BEHIND (the default) a request only queues its attempts: one thread per process sends
what is queued in one pipelined round trip, a few milliseconds later, off the request path (its own
verdict changes are in this process's view at once; other processes see them within STATS_REFRESH_SECONDS
of the write)."""

import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.base import BaseCache
from redis import Redis
from redis.exceptions import NoScriptError, ResponseError

from gateway.cache import LocalExtras, ResilientRedisCache, list_push, lists_get

Result = TypeVar("Result")

logger = logging.getLogger(__name__)

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
    latency: dict[str, float] | None = None  # seconds, by percentile
    ttft: dict[str, float] | None = None  # seconds
    throughput: dict[str, float] | None = None  # output tokens per second


MEASURES = ("latency", "ttft", "throughput")


def _outcomes_key(endpoint_id: int) -> str:
    return f"routing:health:{endpoint_id}:outcomes"


def _samples_key(endpoint_id: int) -> str:
    return f"routing:health:{endpoint_id}:samples"


def _redis_keys(endpoint_id: int) -> list[str]:
    """Outcomes, samples (ids and times), one sorted set per measure, and the sample id counter."""
    base = f"routing:health:{endpoint_id}"
    return [_outcomes_key(endpoint_id), _samples_key(endpoint_id), *(f"{base}:{m}" for m in MEASURES), f"{base}:seq"]


def _number(value: float | None) -> str:
    return "-" if value is None else repr(float(value))


# KEYS: _redis_keys; ARGV: seconds to keep them, the outcome item, the outcomes' cap, the samples' cap, and for
# a sample its time and its measures ("-" for none; no time: no sample). Scores go in as the strings sent,
# so they are stored exactly.
PUSH_LUA = """
local ttl = ARGV[1]
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
redis.call('EXPIRE', KEYS[1], ttl)
if ARGV[5] == '' then return end
local id = tostring(redis.call('INCR', KEYS[6]))
redis.call('RPUSH', KEYS[2], id .. ' ' .. ARGV[5])
for k = 1, 3 do
  if ARGV[5 + k] ~= '-' then redis.call('ZADD', KEYS[2 + k], ARGV[5 + k], id) end
end
while redis.call('LLEN', KEYS[2]) > tonumber(ARGV[4]) do
  local old = string.match(redis.call('LPOP', KEYS[2]), '^(%S+)')
  for k = 3, 5 do redis.call('ZREM', KEYS[k], old) end
end
for k = 2, 6 do redis.call('EXPIRE', KEYS[k], ttl) end
"""

# KEYS: the first five _redis_keys of each endpoint; ARGV: now, STATS_WINDOW, then the quantiles. Samples
# older than the window leave first. Per endpoint: {outcomes as stored, samples in the window, then per
# measure per quantile its value ("-" when the measure has none)}. Quantile q of n values is the one of rank
# floor(q*n) (0-based), as in _percentiles.
STATS_LUA = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local result = {}
for i = 1, #KEYS, 5 do
  while true do
    local oldest = redis.call('LINDEX', KEYS[i + 1], 0)
    if not oldest then break end
    local id, at = string.match(oldest, '^(%S+) (%S+)$')
    if tonumber(at) >= now - window then break end
    redis.call('LPOP', KEYS[i + 1])
    for k = 2, 4 do redis.call('ZREM', KEYS[i + k], id) end
  end
  local entry = {redis.call('LRANGE', KEYS[i], 0, -1), redis.call('LLEN', KEYS[i + 1])}
  for k = 2, 4 do
    local n = redis.call('ZCARD', KEYS[i + k])
    for q = 3, #ARGV do
      if n == 0 then
        table.insert(entry, '-')
      else
        local rank = math.min(n - 1, math.floor(tonumber(ARGV[q]) * n))
        table.insert(entry, redis.call('ZRANGE', KEYS[i + k], rank, rank, 'WITHSCORES')[2])
      end
    end
  end
  table.insert(result, entry)
end
return result
"""
_SHA: dict[str, str] = {}  # script source -> its SHA-1 (EVALSHA; loaded when Redis says it lacks it)


def _sha(source: str) -> str:
    return _SHA.get(source) or _SHA.setdefault(source, hashlib.sha1(source.encode()).hexdigest())  # noqa: S324


@dataclass(frozen=True)
class Attempt:
    endpoint_id: int
    at: str
    ok: bool
    measures: tuple[str, str, str]  # latency, ttft, throughput as sent ("-" for none)

    @property
    def has_sample(self) -> bool:
        return self.ok and self.measures != ("-", "-", "-")


def _run(backend: ResilientRedisCache, source: str, keys: list[str], args: list[str | int | float]) -> Any:
    client = backend.redis_client()
    names = [backend.make_key(key) for key in keys]
    try:
        return client.evalsha(_sha(source), len(names), *names, *args)
    except NoScriptError:  # a restarted or flushed Redis: load it once, then as before
        client.script_load(source)
        return client.evalsha(_sha(source), len(names), *names, *args)


def _redis_push(backend: ResilientRedisCache, attempt: Attempt) -> None:
    sample = [attempt.at, *attempt.measures] if attempt.has_sample else [""]
    args: list[str | int | float] = [
        KEPT_SECONDS,
        f"{attempt.at} {int(attempt.ok)}",
        FAILURES_TO_TRIP,
        MAX_SAMPLES,
        *sample,
    ]
    _run(backend, PUSH_LUA, _redis_keys(attempt.endpoint_id), args)


def _redis_push_many(backend: ResilientRedisCache, attempts: list[Attempt]) -> None:
    """Several attempts' appends in one round trip (each script call stays atomic on its own): one EVALSHA per
    attempt, packed here (an endpoint's keys once; redis-py packing 17 arguments and running its pipeline cost
    two thirds of a batch's CPU) and sent in one write on one pooled connection."""
    client = backend.redis_client()
    packed = b"".join([_push_command(backend, attempt) for attempt in attempts])
    for loaded in (False, True):
        replies = _exchange(client, packed, len(attempts))
        error = next((reply for reply in replies if isinstance(reply, ResponseError)), None)
        if error is None:
            return
        if loaded or not isinstance(error, NoScriptError):
            raise error
        client.script_load(PUSH_LUA)  # none ran (the script is missing for all alike): load it, send them again


def _bulk(value: str) -> bytes:
    data = value.encode()
    return b"$%d\r\n%b\r\n" % (len(data), data)


# (key prefix, version, key function, endpoint id) -> EVALSHA, the script, the key count and the keys, packed
# (and how many parts that is).
_PUSH_HEADS: dict[tuple[str, int, Callable[..., str], int], tuple[int, bytes]] = {}


def _push_command(backend: ResilientRedisCache, attempt: Attempt) -> bytes:
    """EVALSHA PUSH_LUA with the attempt's keys and arguments (as _redis_push sends them), in Redis's protocol."""
    identity = (backend.key_prefix, backend.version, backend.key_func, attempt.endpoint_id)
    known = _PUSH_HEADS.get(identity)
    if known is None:
        keys = [backend.make_key(key) for key in _redis_keys(attempt.endpoint_id)]
        parts = ["EVALSHA", _sha(PUSH_LUA), str(len(keys)), *keys]
        if len(_PUSH_HEADS) >= 4096:
            _PUSH_HEADS.clear()
        known = _PUSH_HEADS[identity] = (len(parts), b"".join([_bulk(part) for part in parts]))
    count, head = known
    sample = [attempt.at, *attempt.measures] if attempt.has_sample else [""]
    args = [str(KEPT_SECONDS), f"{attempt.at} {int(attempt.ok)}", str(FAILURES_TO_TRIP), str(MAX_SAMPLES), *sample]
    return b"*%d\r\n%b%b" % (count + len(args), head, b"".join([_bulk(arg) for arg in args]))


def _exchange(client: Redis, packed: bytes, count: int) -> list[Any]:
    """Send `count` packed commands in one write and read their `count` replies (an error reply as its exception),
    on one pooled connection, retried as redis-py retries a pipeline (a connection error: disconnected, resent)."""
    pool = client.connection_pool
    connection = pool.get_connection()

    def send_and_read() -> list[Any]:
        connection.send_packed_command([packed])
        replies: list[Any] = []  # Redis's replies, and an error reply as its exception
        for _ in range(count):
            try:
                replies.append(connection.read_response())
            except ResponseError as error:  # read on: every reply leaves the socket before it is reused
                replies.append(error)
        return replies

    try:
        return connection.retry.call_with_retry(send_and_read, lambda error: connection.disconnect())
    finally:
        pool.release(connection)


def _redis_stats(backend: ResilientRedisCache, endpoint_ids: list[int], current: float) -> dict[int, EndpointStats]:
    keys = [key for i in endpoint_ids for key in _redis_keys(i)[:5]]
    answer = _run(backend, STATS_LUA, keys, [repr(current), STATS_WINDOW, *PERCENTILES.values()])
    width = len(PERCENTILES)
    found = {}
    for endpoint_id, (outcomes, count, *values) in zip(endpoint_ids, answer, strict=True):
        columns = [values[k * width : (k + 1) * width] for k in range(len(MEASURES))]
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


def _local_push(backend: BaseCache, extras: LocalExtras | None, attempt: Attempt) -> None:
    appends = [(_outcomes_key(attempt.endpoint_id), f"{attempt.at} {int(attempt.ok)}", FAILURES_TO_TRIP)]
    if attempt.has_sample:
        appends.append((_samples_key(attempt.endpoint_id), " ".join((attempt.at, *attempt.measures)), MAX_SAMPLES))
    for key, item, cap in appends:
        if extras is None:
            list_push(key=key, item=item, max_items=cap, timeout=KEPT_SECONDS, backend=backend)
        else:
            extras.list_push(backend, key, item, max_items=cap, timeout=KEPT_SECONDS)


def _shared_or_local(
    redis_op: Callable[[ResilientRedisCache], Result], local_op: Callable[[BaseCache, LocalExtras | None], Result]
) -> Result:
    """redis_op(backend) on the shared Redis cache; local_op(backend, extras) on process-local memory (the
    local-memory cache, or the Redis cache's own fallback while Redis is unavailable)."""
    backend = caches["default"]
    if isinstance(backend, ResilientRedisCache):
        shared = backend.shared
        return backend.resilient(lambda: redis_op(backend), lambda: local_op(shared.local, shared.extras))
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
    attempt = Attempt(endpoint_id, repr(now()), ok, (_number(latency_s), _number(ttft_s), _number(throughput)))
    known = _memo().get(endpoint_id)
    if known is not None and (not ok or not known[1].healthy):
        del _memo()[endpoint_id]  # a change of verdict this process caused: seen here at once
    if getattr(settings, "HEALTH_WRITE_BEHIND", False):
        _writer.put(attempt)
        return
    _shared_or_local(
        lambda backend: _redis_push(backend, attempt), lambda local, extras: _local_push(local, extras, attempt)
    )


def _push_many(attempts: list[Attempt]) -> None:
    def local(backend: BaseCache, extras: LocalExtras | None) -> None:
        for attempt in attempts:
            _local_push(backend, extras, attempt)

    _shared_or_local(lambda backend: _redis_push_many(backend, attempts), local)


class _WriteBehind:
    """One thread per process sends the queued attempts, up to MAX_BATCH in one round trip. Started on first
    use in each process (a forked worker starts its own). An attempt that finds the queue empty waits
    GATHER_SECONDS for others to join its round trip: under load a round trip carries many attempts instead of one
    or two (in the benchmark's run of one request at a time, the writer's share of a request's CPU 6.8% -> 1.2% at
    20 ms; at 16 connections a 20 ms round trip carried about 3 attempts, the writer's share 1.9%, so 100 ms); what
    the process itself saw counts at once (health_record), other processes see it that much later."""

    MAX_BATCH = 256
    GATHER_SECONDS = 0.1

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Attempt] = queue.SimpleQueue()
        self._pid = 0
        self._lock = threading.Lock()
        self._unsent = 0  # attempts put and not sent yet (queued, or in the batch being sent); under _lock

    def put(self, attempt: Attempt) -> None:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._queue = queue.SimpleQueue()  # a parent's queue is not this process's
                    self._unsent = 0
                    threading.Thread(target=self._run, name="health-writer", daemon=True).start()
                    self._pid = os.getpid()
        with self._lock:
            self._unsent += 1
        self._queue.put(attempt)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            if self._queue.empty():
                time.sleep(self.GATHER_SECONDS)
            while len(batch) < self.MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                _push_many(batch)
            except Exception:  # bookkeeping must never stop: the next batch tries again
                logger.exception("could not record %d routing health attempts", len(batch))
            finally:
                with self._lock:
                    self._unsent -= len(batch)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until what was put before now is sent (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._unsent > 0 and time.monotonic() < deadline:
            time.sleep(0.005)


_writer = _WriteBehind()


def health_reset(*, endpoint_id: int) -> None:
    _memo().pop(endpoint_id, None)
    cache.delete_many(_redis_keys(endpoint_id))


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for name, q in PERCENTILES.items()}


def _healthy(outcomes: list[str], current: float) -> bool:
    recent = [item for item in outcomes if float(item.split(" ", 1)[0]) >= current - HEALTH_WINDOW]
    return not (len(recent) == FAILURES_TO_TRIP and all(item.endswith(" 0") for item in recent))


def _local_stats(found: dict[str, list[str]], endpoint_id: int, current: float) -> EndpointStats:
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
    """The stats of every endpoint: as this process read them within STATS_REFRESH_SECONDS (its own failures,
    and its own successes on an endpoint it holds unhealthy, drop them at once), the others read in one round
    trip."""
    current = now()
    known = _memo()
    stale = [i for i in endpoint_ids if i not in known or known[i][0] < current - STATS_REFRESH_SECONDS]
    if stale:

        def local(backend: BaseCache, extras: LocalExtras | None) -> dict[int, EndpointStats]:
            keys = [key for i in stale for key in (_outcomes_key(i), _samples_key(i))]
            found = lists_get(keys=keys, backend=backend)
            return {i: _local_stats(found, i, current) for i in stale}

        for endpoint_id, stats in _shared_or_local(
            lambda backend: _redis_stats(backend, stale, current), local
        ).items():
            known[endpoint_id] = (current, stats)
    return {i: known[i][1] for i in endpoint_ids}


# Stats read recently, per configured cache (tests swap them; Django's backend objects are per thread):
# endpoint id -> (when read, stats). Reading every candidate's stats from Redis on every request was a quarter
# of a request's CPU; routing does not need them fresher than STATS_REFRESH_SECONDS.
STATS_REFRESH_SECONDS = 1.0
_read: dict[tuple[str, str], dict[int, tuple[float, EndpointStats]]] = {}


def _memo() -> dict[int, tuple[float, EndpointStats]]:
    configured = settings.CACHES["default"]
    return _read.setdefault((configured["BACKEND"], str(configured.get("LOCATION", ""))), {})


def stats_forget() -> None:
    """Drop what this process read (the cache was cleared under it)."""
    _read.clear()


STICKY_TTL = 300


def sticky_key(*, account_id: UUID, session_id: str, model: str) -> str:
    digest = hashlib.sha256(f"{account_id}:{model}:{session_id}".encode()).hexdigest()[:40]
    return f"routing:sticky:{digest}"


def sticky_get(*, key: str) -> int | None:
    return cache.get(key)


def sticky_set(*, key: str, endpoint_id: int) -> None:
    cache.set(key, endpoint_id, timeout=STICKY_TTL)
