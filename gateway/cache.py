"""The shared cache: Redis when REDIS_URL is set, and process-local memory whenever Redis fails.

Redis is an optimisation (routing health and percentiles, sticky sessions, the rate-limit counters): it
lets every worker and instance see the same picture, but a request must never fail because of it. This
Django cache backend (BaseCache on redis-py, storing values as Django's RedisCache does) gives every caller of
`django.core.cache.cache`:

- short socket timeouts (REDIS_CONNECT_TIMEOUT, REDIS_TIMEOUT), so a dead or hung Redis cannot stall
  a request for long;
- on any Redis error, the operation served from a process-local memory cache instead. The first error
  opens an outage: it is logged once (as is the recovery), and for REDIS_RETRY_SECONDS the process does
  not try Redis at all; then one caller probes it again, and the first success ends the outage;
- counters of errors, outages and operations served locally, per process (`cache_status()`, shown by
  /readyz).

Beyond Django's cache API, with the same fallback: `window_incr()`, an atomic fixed-window counter (one Lua
call in Redis, a locked dict locally) for the rate limit, which says whether it counted in the shared cache
or only in this process; `list_push()` / `lists_get()`, capped lists appended atomically (routing health).
With the local-memory backend (no REDIS_URL) these work per process."""

import json
import logging
import math
import pickle
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.cache import caches
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import cached_property
from redis import ConnectionPool, Redis
from redis.commands.core import Script
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_RETRY_SECONDS = 5.0
# Errors that mean "Redis is unavailable": redis-py wraps socket errors in its own, OSError for the rest.
UNAVAILABLE = (RedisError, OSError)

# KEYS[1] the counter, ARGV[1] the window in milliseconds: count this call, start the window on the first.
WINDOW_INCR_LUA = """
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
"""


class Breaker:
    """Whether this process should use Redis now; the outage log and counters."""

    def __init__(self, *, retry_seconds: float) -> None:
        self.lock = threading.Lock()
        self.retry_seconds = retry_seconds
        self.degraded_since: float | None = None
        self.retry_at = 0.0
        self.errors = 0
        self.outages = 0
        self.fallback_operations = 0
        self.last_error = ""

    def should_try(self) -> bool:
        if self.degraded_since is None:
            return True
        with self.lock:
            if self.degraded_since is None:
                return True
            current = time.monotonic()
            if current < self.retry_at:
                return False
            self.retry_at = current + self.retry_seconds  # one caller probes; the others stay local meanwhile
            return True

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors += 1
            self.last_error = type(exc).__name__
            self.retry_at = time.monotonic() + self.retry_seconds
            if self.degraded_since is not None:
                return
            self.degraded_since = time.monotonic()
            self.outages += 1
        logger.warning(
            "shared cache: Redis unavailable (%s: %s); serving from process-local memory, retrying every %g s",
            type(exc).__name__,
            exc,
            self.retry_seconds,
        )

    def succeeded(self) -> None:
        if self.degraded_since is None:
            return
        with self.lock:
            if self.degraded_since is None:
                return
            lasted = time.monotonic() - self.degraded_since
            self.degraded_since = None
        logger.warning("shared cache: Redis is back after %.1f s of outage; using it again", lasted)

    def served_locally(self) -> None:
        with self.lock:
            self.fallback_operations += 1

    @property
    def degraded(self) -> bool:
        return self.degraded_since is not None

    def status(self) -> dict[str, Any]:
        since = self.degraded_since
        return {
            "state": "degraded" if since is not None else "ok",
            "degraded_for_s": round(time.monotonic() - since, 1) if since is not None else None,
            "errors": self.errors,
            "outages": self.outages,
            "fallback_operations": self.fallback_operations,
            "last_error": self.last_error or None,
        }


class LocalWindows:
    """Fixed-window counters in this process: {key: (count, window end)}, swept as they expire."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.windows: dict[str, tuple[int, float]] = {}
        self.next_sweep = 0.0

    def incr(self, key: str, seconds: float) -> tuple[int, float]:
        current = time.monotonic()
        with self.lock:
            if current >= self.next_sweep:
                self.windows = {k: v for k, v in self.windows.items() if v[1] > current}
                self.next_sweep = current + 60
            count, ends = self.windows.get(key, (0, 0.0))
            if ends <= current:
                count, ends = 0, current + seconds
            self.windows[key] = (count + 1, ends)
            return count + 1, ends - current

    def clear(self) -> None:
        with self.lock:
            self.windows.clear()


class LocalExtras:
    """Counters and capped lists for a local-memory cache (its own, or a Redis cache's fallback)."""

    def __init__(self) -> None:
        self.windows = LocalWindows()
        self.lists_lock = threading.Lock()

    def list_push(self, cache: BaseCache, key: str, item: Any, *, max_items: int, timeout: int) -> None:
        with self.lists_lock:
            items = cache.get(key) or []
            items = [*items[max(0, len(items) - max_items + 1) :], item] if max_items > 1 else [item]
            cache.set(key, items, timeout=timeout)

    @staticmethod
    def lists_get(cache: BaseCache, keys: list[str]) -> dict[str, list[Any]]:
        return {key: items for key, items in cache.get_many(keys).items() if items}


@dataclass
class Shared:
    """What all threads of a process share for one Redis location (Django makes a backend per thread)."""

    client: Redis  # one for the process: it takes a connection from its pool for each command
    breaker: Breaker
    local: LocMemCache
    extras: LocalExtras
    window_script: Script  # WINDOW_INCR_LUA, registered on the client (loaded into Redis on first use)


_SHARED: dict[tuple[str, tuple[tuple[str, str], ...]], Shared] = {}
_SHARED_LOCK = threading.Lock()
_LOCMEM_EXTRAS: dict[tuple[str, int, object], LocalExtras] = {}
# Django's RedisCache options that redis-py's pool does not take (this backend has its own serializer and pool)
REFUSED_OPTIONS = ("serializer", "pool_class", "parser_class")


def _dumps(value: Any) -> bytes | int:
    """As Django's RedisCache stores values (so either can read the other's): pickled, except ints, stored as
    Redis integers so that INCR works on them (type(), not isinstance(): a bool stays pickled)."""
    return value if type(value) is int else pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def _loads(data: Any) -> Any:  # bytes: the client does not decode responses
    try:
        return int(data)
    except ValueError:
        return pickle.loads(data)  # noqa: S301  # only this process's own writes are in the cache


class ResilientRedisCache(BaseCache):
    """A Redis cache backend (Django's cache API on redis-py), falling back to process-local memory while Redis is
    unavailable. LOCATION is one Redis URL; OPTIONS go to redis-py's ConnectionPool.from_url (socket_timeout,
    socket_connect_timeout, max_connections, ...); RETRY_SECONDS is the back-off after an error."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(params)
        servers = [s for s in re.split("[;,]", server) if s] if isinstance(server, str) else list(server)
        if len(servers) != 1:
            raise ImproperlyConfigured(f"{type(self).__name__} takes one Redis location, not {len(servers)}")
        options = dict(params.get("OPTIONS") or {})
        refused = sorted(set(options) & set(REFUSED_OPTIONS))
        if refused:
            raise ImproperlyConfigured(f"{type(self).__name__} does not take the OPTIONS {', '.join(refused)}")
        self.location = servers[0]
        self.pool_options = options
        self.retry_seconds = float(params.get("RETRY_SECONDS", DEFAULT_RETRY_SECONDS))
        self.timeout_param = params.get("TIMEOUT", 300)

    @cached_property
    def shared(self) -> Shared:
        identity = (self.location, tuple(sorted((k, repr(v)) for k, v in self.pool_options.items())))
        with _SHARED_LOCK:
            if identity not in _SHARED:
                client = Redis(connection_pool=ConnectionPool.from_url(self.location, **self.pool_options))
                _SHARED[identity] = Shared(
                    client=client,
                    breaker=Breaker(retry_seconds=self.retry_seconds),
                    local=LocMemCache(
                        f"gateway-fallback:{identity!r}",
                        {"TIMEOUT": self.timeout_param, "OPTIONS": {"MAX_ENTRIES": 10000}},
                    ),
                    extras=LocalExtras(),
                    window_script=client.register_script(WINDOW_INCR_LUA),
                )
            return _SHARED[identity]

    def redis_client(self) -> Redis:
        """The process's client for this location (for commands beyond the cache API; wrap them in resilient())."""
        return self.shared.client

    @property
    def breaker(self) -> Breaker:
        return self.shared.breaker

    def resilient(self, on_redis: Callable[[], T], on_local: Callable[[], T]) -> T:
        """on_redis() while Redis is usable, else (and when it fails now) on_local()."""
        breaker = self.breaker
        if breaker.should_try():
            try:
                result = on_redis()
            except UNAVAILABLE as exc:
                breaker.failed(exc)
            else:
                breaker.succeeded()
                return result
        breaker.served_locally()
        return on_local()

    def get_backend_timeout(self, timeout: float | None = DEFAULT_TIMEOUT) -> int | None:
        """Seconds to live as Redis takes them (BaseCache gives an expiry time): None persists, 0 deletes."""
        if timeout == DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        return None if timeout is None else max(0, int(timeout))

    def add(self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        def on_redis() -> bool:
            made, seconds = self.make_and_validate_key(key, version=version), self.get_backend_timeout(timeout)
            client = self.shared.client
            if seconds == 0:  # added and gone at once, as Django's RedisCache does
                added = bool(client.set(made, _dumps(value), nx=True))
                if added:
                    client.delete(made)
                return added
            return bool(client.set(made, _dumps(value), ex=seconds, nx=True))

        return self.resilient(on_redis, lambda: self.shared.local.add(key, value, timeout, version))

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        def on_redis() -> Any:
            value = self.shared.client.get(self.make_and_validate_key(key, version=version))
            return default if value is None else _loads(value)

        return self.resilient(on_redis, lambda: self.shared.local.get(key, default, version))

    def set(self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        def on_redis() -> None:
            made, seconds = self.make_and_validate_key(key, version=version), self.get_backend_timeout(timeout)
            if seconds == 0:
                self.shared.client.delete(made)
            else:
                self.shared.client.set(made, _dumps(value), ex=seconds)

        self.resilient(on_redis, lambda: self.shared.local.set(key, value, timeout, version))

    def touch(self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        def on_redis() -> bool:
            made, seconds = self.make_and_validate_key(key, version=version), self.get_backend_timeout(timeout)
            client = self.shared.client
            return bool(client.persist(made) if seconds is None else client.expire(made, seconds))

        return self.resilient(on_redis, lambda: self.shared.local.touch(key, timeout, version))

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self.resilient(
            lambda: bool(self.shared.client.delete(self.make_and_validate_key(key, version=version))),
            lambda: self.shared.local.delete(key, version),
        )

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        keys = list(keys)
        if not keys:  # MGET with no key is an error reply, not an empty answer
            return {}

        def on_redis() -> dict[Any, Any]:
            made = {self.make_and_validate_key(key, version=version): key for key in keys}
            values = self.shared.client.mget(list(made))
            return {made[k]: _loads(v) for k, v in zip(made, values, strict=True) if v is not None}

        return self.resilient(on_redis, lambda: self.shared.local.get_many(keys, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self.resilient(
            lambda: bool(self.shared.client.exists(self.make_and_validate_key(key, version=version))),
            lambda: self.shared.local.has_key(key, version),
        )

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        def on_redis() -> int:
            made = self.make_and_validate_key(key, version=version)
            if not self.shared.client.exists(made):
                raise ValueError(f"Key '{made}' not found.")
            return int(self.shared.client.incr(made, delta))

        return self.resilient(on_redis, lambda: self.shared.local.incr(key, delta, version))

    def set_many(
        self, data: dict[Any, Any], timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        if not data:
            return []

        def on_redis() -> list[Any]:
            made = {self.make_and_validate_key(key, version=version): _dumps(value) for key, value in data.items()}
            seconds = self.get_backend_timeout(timeout)
            pipeline = self.shared.client.pipeline()
            pipeline.mset(made)
            if seconds is not None:  # MSET takes no expiry: one EXPIRE a key, in the same round trip
                for key in made:
                    pipeline.expire(key, seconds)
            pipeline.execute()
            return []

        return self.resilient(on_redis, lambda: self.shared.local.set_many(data, timeout, version))

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        keys = list(keys)
        if not keys:
            return
        self.resilient(
            lambda: self.shared.client.delete(*[self.make_and_validate_key(key, version=version) for key in keys]),
            lambda: self.shared.local.delete_many(keys, version),
        )

    def clear(self) -> None:
        self.shared.local.clear()
        self.shared.extras.windows.clear()
        self.resilient(lambda: self.shared.client.flushdb(), lambda: None)

    def close(self, **kwargs: Any) -> None:
        """Nothing to close: Django closes caches at each request's end, and the pool serves the whole process."""

    def window_incr(self, key: str, seconds: float) -> tuple[int, float, bool]:
        """(count, seconds left in the window, counted in Redis)."""

        def on_redis() -> tuple[int, float, bool]:
            made = self.make_and_validate_key(key)
            count, ttl_ms = self.shared.window_script(keys=[made], args=[max(1, int(seconds * 1000))])
            return int(count), int(ttl_ms) / 1000, True

        return self.resilient(on_redis, lambda: (*self.shared.extras.windows.incr(key, seconds), False))

    def list_push(self, key: str, item: Any, *, max_items: int, timeout: int) -> None:
        def on_redis() -> None:
            made = self.make_and_validate_key(key)
            pipeline = self.shared.client.pipeline(transaction=True)
            pipeline.rpush(made, json.dumps(item))
            pipeline.ltrim(made, -max_items, -1)
            pipeline.expire(made, timeout)
            pipeline.execute()

        self.resilient(
            on_redis,
            lambda: self.shared.extras.list_push(self.shared.local, key, item, max_items=max_items, timeout=timeout),
        )

    def lists_get(self, keys: list[str]) -> dict[str, list[Any]]:
        def on_redis() -> dict[str, list[Any]]:
            made = {self.make_and_validate_key(key): key for key in keys}
            pipeline = self.shared.client.pipeline(transaction=False)
            for key in made:
                pipeline.lrange(key, 0, -1)
            pairs = zip(made, pipeline.execute(), strict=True)
            return {made[key]: [json.loads(item) for item in items] for key, items in pairs if items}

        return self.resilient(on_redis, lambda: self.shared.extras.lists_get(self.shared.local, keys))

    def probe(self) -> bool:
        """Talk to Redis now, whatever the back-off says (for /readyz); True when it answered."""
        try:
            self.shared.client.set(self.make_and_validate_key("readyz"), b"1", ex=5)
        except UNAVAILABLE as exc:
            self.breaker.failed(exc)
            return False
        self.breaker.succeeded()
        return True


def _locmem_extras(backend: BaseCache) -> LocalExtras:
    """The window counters of a local-memory cache, shared by its per-thread instances (those of caches with the
    same KEY_PREFIX, VERSION and KEY_FUNCTION count together: their keys would collide in one storage too)."""
    name = (backend.key_prefix, backend.version, backend.key_func)
    if name not in _LOCMEM_EXTRAS:
        with _SHARED_LOCK:
            _LOCMEM_EXTRAS.setdefault(name, LocalExtras())
    return _LOCMEM_EXTRAS[name]


@dataclass(frozen=True)
class WindowCount:
    count: int  # calls in the current window, this one included
    retry_after: int  # whole seconds until the window ends (at least 1)
    shared: bool  # counted in the shared cache; False when counted in this process only


def window_incr(*, key: str, seconds: float, backend: BaseCache | None = None) -> WindowCount:
    """Count one call against `key` in a fixed window of `seconds`, atomically."""
    backend = backend or caches["default"]
    if isinstance(backend, ResilientRedisCache):
        count, ttl, shared = backend.window_incr(key, seconds)
    else:
        (count, ttl), shared = _locmem_extras(backend).windows.incr(key, seconds), False
    return WindowCount(count=count, retry_after=max(1, math.ceil(ttl)), shared=shared)


def list_push(*, key: str, item: Any, max_items: int, timeout: int, backend: BaseCache | None = None) -> None:
    """Append a JSON-able item to a list of at most `max_items` (the oldest go), kept `timeout` seconds after
    the last append. Exact in Redis (RPUSH + LTRIM in one transaction) and in local memory (locked)."""
    backend = backend or caches["default"]
    if isinstance(backend, ResilientRedisCache):
        backend.list_push(key, item, max_items=max_items, timeout=timeout)
    else:
        _locmem_extras(backend).list_push(backend, key, item, max_items=max_items, timeout=timeout)


def lists_get(*, keys: list[str], backend: BaseCache | None = None) -> dict[str, list[Any]]:
    """The lists of `list_push` by key (absent keys left out)."""
    backend = backend or caches["default"]
    if isinstance(backend, ResilientRedisCache):
        return backend.lists_get(keys)
    return LocalExtras.lists_get(backend, keys)


def cache_uses_redis() -> bool:
    return isinstance(caches["default"], ResilientRedisCache)


def cache_status(*, probe: bool = False) -> dict[str, Any]:
    """This process's view of the shared cache: backend, state (ok | degraded) and its counters."""
    backend = caches["default"]
    if not isinstance(backend, ResilientRedisCache):
        return {"backend": "local", "state": "ok"}
    if probe:
        backend.probe()
    return {"backend": "redis", **backend.breaker.status()}
