"""The shared cache: Redis when REDIS_URL is set, and process-local memory whenever Redis fails.

Redis is an optimisation (routing health and percentiles, sticky sessions, the rate-limit counters): it
lets every worker and instance see the same picture, but a request must never fail because of it. This
Django cache backend wraps Django's RedisCache so that every caller of `django.core.cache.cache` gets:

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property
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

    client: object  # django's RedisCacheClient: its connection pool
    breaker: Breaker
    local: LocMemCache
    extras: LocalExtras
    script: Any = None  # redis-py's registered Lua script, made on first use


_SHARED: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Shared] = {}
_SHARED_LOCK = threading.Lock()
_LOCMEM_EXTRAS: dict[str, LocalExtras] = {}


class OneClientPerPool(RedisCacheClient):
    """Django builds a new redis.Redis for every cache call (and each build fills a table of about 300
    response callbacks: 0.1-0.3 ms of CPU a call). One per connection pool serves every thread: a redis.Redis
    takes a pooled connection for each command."""

    # Set by RedisCacheClient (private there, so not in django-stubs).
    _client: type
    _get_connection_pool: Callable[[bool], Any]

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        clients: dict[int, Any] = self.__dict__.setdefault("_clients", {})
        client = clients.get(id(pool))
        if client is None:
            client = clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ResilientRedisCache(RedisCache):
    """Django's RedisCache, falling back to process-local memory while Redis is unavailable."""

    # Set by RedisCache.__init__ (private there, so not in django-stubs).
    _servers: list[str]
    _options: dict[str, Any]
    _class: type

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = OneClientPerPool
        self._retry_seconds = float(params.get("RETRY_SECONDS", DEFAULT_RETRY_SECONDS))
        self._timeout_param = params.get("TIMEOUT", 300)

    @cached_property
    def shared(self) -> Shared:
        identity = (tuple(self._servers), tuple(sorted((k, repr(v)) for k, v in self._options.items())))
        with _SHARED_LOCK:
            if identity not in _SHARED:
                _SHARED[identity] = Shared(
                    client=self._class(self._servers, **self._options),
                    breaker=Breaker(retry_seconds=self._retry_seconds),
                    local=LocMemCache(
                        f"gateway-fallback:{identity!r}",
                        {"TIMEOUT": self._timeout_param, "OPTIONS": {"MAX_ENTRIES": 10000}},
                    ),
                    extras=LocalExtras(),
                )
            return _SHARED[identity]

    @property
    def _cache(self) -> Any:  # django's RedisCacheClient (OneClientPerPool)
        return self.shared.client

    @property
    def breaker(self) -> Breaker:
        return self.shared.breaker

    def _resilient(self, on_redis: Callable[[], T], on_local: Callable[[], T]) -> T:
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

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._resilient(
            lambda: getattr(super(ResilientRedisCache, self), name)(*args, **kwargs),
            lambda: getattr(self.shared.local, name)(*args, **kwargs),
        )

    def add(self, *args: Any, **kwargs: Any) -> bool:
        return self._call("add", *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("get", *args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> None:
        return self._call("set", *args, **kwargs)

    def touch(self, *args: Any, **kwargs: Any) -> bool:
        return self._call("touch", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> bool:
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args: Any, **kwargs: Any) -> bool:
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args: Any, **kwargs: Any) -> int:
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args: Any, **kwargs: Any) -> None:
        return self._call("delete_many", *args, **kwargs)

    def clear(self) -> None:
        self.shared.local.clear()
        self.shared.extras.windows.clear()
        return self._call("clear")

    def window_incr(self, key: str, seconds: float) -> tuple[int, float, bool]:
        """(count, seconds left in the window, counted in Redis)."""

        def on_redis() -> tuple[int, float, bool]:
            made = self.make_and_validate_key(key)
            client = self._cache.get_client(made, write=True)
            if self.shared.script is None:
                self.shared.script = client.register_script(WINDOW_INCR_LUA)
            count, ttl_ms = self.shared.script(keys=[made], args=[max(1, int(seconds * 1000))], client=client)
            return int(count), int(ttl_ms) / 1000, True

        return self._resilient(on_redis, lambda: (*self.shared.extras.windows.incr(key, seconds), False))

    def list_push(self, key: str, item: Any, *, max_items: int, timeout: int) -> None:
        def on_redis() -> None:
            made = self.make_and_validate_key(key)
            pipeline = self._cache.get_client(made, write=True).pipeline(transaction=True)
            pipeline.rpush(made, json.dumps(item))
            pipeline.ltrim(made, -max_items, -1)
            pipeline.expire(made, timeout)
            pipeline.execute()

        self._resilient(
            on_redis,
            lambda: self.shared.extras.list_push(self.shared.local, key, item, max_items=max_items, timeout=timeout),
        )

    def lists_get(self, keys: list[str]) -> dict[str, list[Any]]:
        def on_redis() -> dict[str, list[Any]]:
            made = {self.make_and_validate_key(key): key for key in keys}
            pipeline = self._cache.get_client(None).pipeline(transaction=False)
            for key in made:
                pipeline.lrange(key, 0, -1)
            pairs = zip(made, pipeline.execute(), strict=True)
            return {made[key]: [json.loads(item) for item in items] for key, items in pairs if items}

        return self._resilient(on_redis, lambda: self.shared.extras.lists_get(self.shared.local, keys))

    def probe(self) -> bool:
        """Talk to Redis now, whatever the back-off says (for /readyz); True when it answered."""
        try:
            self._cache.get_client(None, write=True).set(self.make_and_validate_key("readyz"), b"1", ex=5)
        except UNAVAILABLE as exc:
            self.breaker.failed(exc)
            return False
        self.breaker.succeeded()
        return True


def _locmem_extras(backend: BaseCache) -> LocalExtras:
    name = str(id(getattr(backend, "_cache", backend)))  # LocMemCache: its storage, shared by name
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
