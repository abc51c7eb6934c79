"""Redis is an optimisation (issue 9, item 5): the shared cache falls back to process-local memory when Redis
fails (logged once per outage, counted), comes back to Redis by itself, and a hung Redis cannot stall a
caller. The rate-limit counter is atomic (item 15), and fails open or closed as configured."""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from django.test import Client, override_settings

from gateway.accounts.throttling import MSG_RATE_LIMITER_UNAVAILABLE
from gateway.cache import ResilientRedisCache, list_push, lists_get, window_incr
from tests.live import REDIS_SERVER, PrivateRedis, free_port
from tests.support import assert_error_envelope


@pytest.fixture
def private_redis():
    if not shutil.which(REDIS_SERVER):
        pytest.skip("needs redis-server")
    server = PrivateRedis()
    yield server
    server.kill()


def resilient(url: str, retry_seconds: float = 0.5) -> ResilientRedisCache:
    """A backend configured like settings.CACHES (short timeouts), on its own Redis location."""
    return ResilientRedisCache(
        url, {"RETRY_SECONDS": retry_seconds, "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.5}}
    )


def outage_logs(caplog) -> Counter:
    return Counter(
        "unavailable" if "Redis unavailable" in r.getMessage() else "back"
        for r in caplog.records
        if r.name == "gateway.cache"
    )


def test_falls_back_to_local_memory_then_returns_to_redis(private_redis, caplog):
    caplog.set_level(logging.INFO, logger="gateway.cache")
    backend = resilient(private_redis.url)
    raw = private_redis.client()
    # Given a working Redis: values, counters and lists live there
    backend.set("greeting", "from redis")
    list_push(key="samples", item=[1, True], max_items=3, timeout=60, backend=backend)
    assert window_incr(key="calls", seconds=60, backend=backend).shared
    assert raw.exists(":1:greeting", ":1:samples", ":1:calls") == 3
    # When Redis dies
    private_redis.kill()
    # Then every operation is served from local memory, without an exception
    backend.set("greeting", "from memory")
    assert backend.get("greeting") == "from memory"
    assert backend.get_many(["greeting", "absent"]) == {"greeting": "from memory"}
    assert backend.add("once", 1) and not backend.add("once", 2)
    for n in range(5):
        list_push(key="samples", item=[n, False], max_items=3, timeout=60, backend=backend)
    assert lists_get(keys=["samples", "none"], backend=backend) == {"samples": [[2, False], [3, False], [4, False]]}
    counted = [window_incr(key="calls", seconds=60, backend=backend) for _ in range(3)]
    assert [c.count for c in counted] == [1, 2, 3] and not any(c.shared for c in counted)
    assert 1 <= counted[-1].retry_after <= 60
    # And the outage was logged once and counted: one Redis error, then Redis left alone during the back-off
    status = backend.breaker.status()
    assert status["state"] == "degraded" and status["outages"] == 1 and status["errors"] == 1
    assert status["fallback_operations"] >= 12
    # When the back-off is over and Redis is still down, one call probes it: one more error, no more logs
    time.sleep(0.6)
    assert backend.get("greeting") == "from memory"
    assert backend.breaker.status()["errors"] == 2
    assert outage_logs(caplog) == {"unavailable": 1}
    # When Redis is back, the next call after the back-off uses it again, by itself
    private_redis.start()
    time.sleep(0.6)
    backend.set("after", "back in redis")
    assert raw.get(":1:after") is not None
    assert backend.get("greeting") is None  # Redis restarted empty: the local values are not served any more
    assert backend.breaker.status()["state"] == "ok"
    assert outage_logs(caplog) == {"unavailable": 1, "back": 1}


def test_a_hung_redis_cannot_stall_the_caller():
    # Given a "Redis" that accepts connections and never answers
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        backend = resilient(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", retry_seconds=30)
        # When a caller reads from it, it gets the fallback's answer after the socket timeout (0.5 s)
        started = time.monotonic()
        assert backend.get("anything", "default") == "default"
        assert time.monotonic() - started < 5
        # And for the back-off period nobody waits on it again
        started = time.monotonic()
        for _ in range(20):
            backend.set("k", "v")
            assert backend.get("k") == "v"
        assert time.monotonic() - started < 1
        assert backend.breaker.status()["last_error"] == "TimeoutError"
        assert backend.breaker.status()["errors"] == 1


def test_counter_and_lists_are_atomic_under_concurrency(private_redis):
    backend = resilient(private_redis.url)
    counts, barrier = [], threading.Barrier(40)

    def hit(n: int) -> None:
        barrier.wait()
        counts.append(window_incr(key="burst", seconds=60, backend=backend).count)
        list_push(key="pushes", item=n, max_items=1000, timeout=60, backend=backend)

    threads = [threading.Thread(target=hit, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counts) == list(range(1, 41))  # no two callers saw the same count
    assert sorted(lists_get(keys=["pushes"], backend=backend)["pushes"]) == list(range(40))


def dead_redis_caches() -> dict:
    return {
        "default": {
            "BACKEND": "gateway.cache.ResilientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "RETRY_SECONDS": 30,
            "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.5},
        }
    }


def test_rate_limit_fails_open_per_process_when_redis_is_down(alice):
    with override_settings(CACHES=dead_redis_caches(), GATEWAY_RATE_LIMIT="2/min"):
        client = alice.client()
        assert [client.get("/api/v1/key").status_code for _ in range(2)] == [200, 200]
        response = client.get("/api/v1/key")
        assert_error_envelope(response, 429)
        assert 1 <= int(response["Retry-After"]) <= 60
        ready = Client().get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"database": "ok", "cache": "degraded"}
        assert ready.json()["details"]["cache"]["errors"] >= 1


def test_rate_limit_fails_closed_when_so_configured(alice):
    with override_settings(
        CACHES=dead_redis_caches(),
        GATEWAY_RATE_LIMIT="2/min",
        GATEWAY_RATE_LIMIT_FAIL_OPEN=False,
        REDIS_RETRY_SECONDS=5,
    ):
        response = alice.client().get("/api/v1/key")
        body = assert_error_envelope(response, 503)
        assert body["error"]["message"] == MSG_RATE_LIMITER_UNAVAILABLE
        assert response["Retry-After"] == "5"


def test_the_configured_cache_takes_a_gevent_workers_concurrency_without_an_outage(private_redis, caplog):
    """redis-py's pool allows 100 connections unless told otherwise, and the 101st concurrent command is an error
    (to the cache: an outage, 5 s on local memory). A gevent worker runs up to 1,000 requests at once."""
    caplog.set_level(logging.INFO, logger="gateway.cache")
    # The cache as the settings configure it with a REDIS_URL (read in a fresh interpreter: this one may have none)
    configured = subprocess.run(
        [sys.executable, "-c", SETTINGS_CACHE],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "gateway.settings.base", "REDIS_URL": private_redis.url},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cache = json.loads(configured.stdout)
    assert cache["OPTIONS"]["max_connections"] >= 1000
    backend = ResilientRedisCache(cache["LOCATION"], {key: value for key, value in cache.items() if key != "LOCATION"})
    # Given 300 commands in flight at once (each holding a pooled connection), then one more command
    pool = backend.redis_client().connection_pool
    held = [pool.get_connection() for _ in range(300)]
    try:
        backend.set("still", "shared")
        assert private_redis.client().exists(":1:still") and backend.get("still") == "shared"
    finally:
        for conn in held:
            pool.release(conn)
    # Then Redis was never given up on
    assert not backend.breaker.degraded and outage_logs(caplog) == Counter()


SETTINGS_CACHE = """
import json
from django.conf import settings
cache = settings.CACHES["default"]
print(json.dumps({key: value for key, value in cache.items() if key != "BACKEND"}))
"""
