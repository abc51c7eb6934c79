"""The shared cache backend keeps Django's cache contract on Redis, on public APIs only (issue 30): values stored
as Django's own RedisCache stores them (either reads the other's), Django's timeout rules, one redis.Redis per
process and location, and a stream's access-log line written when the response is closed."""

import ast
import logging
import shutil
from pathlib import Path

import pytest
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from django.http import StreamingHttpResponse
from django.test import RequestFactory

from gateway.cache import ResilientRedisCache
from gateway.console import metrics
from gateway.console.middleware import RequestLogMiddleware
from tests.live import REDIS_SERVER, PrivateRedis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def private_redis():
    if not shutil.which(REDIS_SERVER):
        pytest.skip("needs redis-server")
    server = PrivateRedis()
    yield server
    server.kill()


def test_the_django_cache_api_on_redis(private_redis):
    backend = ResilientRedisCache(private_redis.url, {"KEY_PREFIX": "p", "OPTIONS": {"socket_timeout": 1}})
    raw = private_redis.client()
    # Values round-trip; an int is a Redis integer (so incr/decr are atomic there), a bool stays a bool
    backend.set("obj", {"a": [1, 2]})
    backend.set("n", 5)
    backend.set("flag", True)
    assert backend.get("obj") == {"a": [1, 2]} and backend.get("flag") is True
    assert raw.get("p:1:n") == b"5"
    assert backend.incr("n", 3) == 8 and backend.decr("n") == 7 and backend.get("n") == 7
    with pytest.raises(ValueError, match="not found"):
        backend.incr("absent")
    assert backend.get("absent", "fallback") == "fallback"
    # add only when absent; timeouts as Django's: default, None persists, 0 deletes
    assert backend.add("once", "first") and not backend.add("once", "second") and backend.get("once") == "first"
    assert 0 < raw.ttl("p:1:once") <= 300
    backend.set("forever", 1, timeout=None)
    assert raw.ttl("p:1:forever") == -1
    backend.set("forever", 1, timeout=0)
    assert not backend.has_key("forever")
    assert backend.touch("once", 30) and 0 < raw.ttl("p:1:once") <= 30
    assert backend.touch("once", None) and raw.ttl("p:1:once") == -1
    assert not backend.touch("absent", 30)
    # many at once, versions kept apart
    assert backend.set_many({"x": 1, "y": "two"}, timeout=60) == []
    assert backend.get_many(["x", "y", "absent"]) == {"x": 1, "y": "two"}
    assert backend.get_many([]) == {} and 0 < raw.ttl("p:1:y") <= 60
    backend.set("x", "v2", version=2)
    assert backend.get("x") == 1 and backend.get("x", version=2) == "v2"
    backend.delete_many(["x", "y"])
    backend.delete_many([])
    assert backend.get_many(["x", "y"]) == {} and backend.delete("once") and not backend.delete("once")
    # Nothing above was an outage
    assert backend.breaker.status()["errors"] == 0
    backend.clear()
    assert raw.dbsize() == 0


def test_values_are_readable_by_djangos_redis_cache_and_back(private_redis):
    ours = ResilientRedisCache(private_redis.url, {})
    django = RedisCache(private_redis.url, {})
    ours.set("ours", {"from": "gateway"})
    ours.set("count", 3)
    django.set("theirs", ["from", "django"])
    assert django.get("ours") == {"from": "gateway"} and django.incr("count") == 4
    assert ours.get("theirs") == ["from", "django"] and ours.get("count") == 4


def test_one_client_per_process_and_location(private_redis):
    params = {"OPTIONS": {"socket_timeout": 1, "max_connections": 50}}
    first, second = ResilientRedisCache(private_redis.url, params), ResilientRedisCache(private_redis.url, params)
    assert first.redis_client() is second.redis_client()
    assert first.redis_client().connection_pool.max_connections == 50
    other = ResilientRedisCache(private_redis.url, {"OPTIONS": {"socket_timeout": 2}})
    assert other.redis_client() is not first.redis_client()


@pytest.mark.parametrize(
    ("location", "options", "named"),
    [
        ("redis://127.0.0.1:1/0,redis://127.0.0.1:2/0", {}, "one Redis location"),
        ("redis://127.0.0.1:1/0", {"serializer": "x", "pool_class": "y"}, "pool_class, serializer"),
    ],
)
def test_a_configuration_it_cannot_honour_is_refused(location, options, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        ResilientRedisCache(location, {"OPTIONS": options})


def test_the_resilient_wrapper_serves_locally_while_redis_fails():
    backend = ResilientRedisCache("redis://127.0.0.1:1/0", {"RETRY_SECONDS": 30})

    def fails() -> str:
        raise ConnectionError("down")

    assert backend.resilient(fails, lambda: "local") == "local"
    assert backend.resilient(lambda: "redis", lambda: "local") == "local"  # backing off: Redis not tried
    assert backend.breaker.status()["outages"] == 1


def test_no_module_reaches_into_djangos_private_cache_or_response_parts():
    reaches = {"_cache", "_class", "_servers", "_options", "_resource_closers", "_get_connection_pool", "_client"}
    found = []
    for package in ("gateway", "routing"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in reaches:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert found == []


def open_streams() -> float:
    return sum(sample.value for family in metrics.OPEN_STREAMS.collect() for sample in family.samples)


@pytest.mark.parametrize("started", [True, False])
def test_a_stream_is_logged_when_closed_even_if_never_sent(caplog, started):
    caplog.set_level(logging.INFO, logger="gateway.access")
    closed = []

    def chunks():
        try:
            yield b"one"
            yield b"two"
        finally:
            closed.append(True)

    middleware = RequestLogMiddleware(lambda request: StreamingHttpResponse(chunks()))
    before = open_streams()
    response = middleware(RequestFactory().get("/stream"))
    assert open_streams() == before + 1 and not caplog.records
    if started:
        assert next(iter(response)) == b"one"
    response.close()  # the client went away (or the stream ended): the server closes the response
    assert open_streams() == before
    assert [record.getMessage().count('"stream":true') for record in caplog.records] == [1]
    assert closed == ([True] if started else [])  # the stream's own generator is still closed by Django
