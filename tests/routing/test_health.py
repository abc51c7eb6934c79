"""Health bookkeeping (issue 11): exact capped lists in Redis, one round trip for an attempt's writes and one
for a request's reads, nothing lost under concurrency, and the same verdicts from process-local memory when
Redis is down or not configured."""

import re
import shutil
import threading
from collections.abc import Iterator

import pytest
import redis
import redis.connection
from django.core.cache import caches
from django.test import override_settings

from gateway.cache import cache_status
from routing import health
from tests.live import REDIS_SERVER, PrivateRedis, free_port

LOCAL = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "health-tests"}}


def redis_caches(url: str) -> dict:
    return {
        "default": {
            "BACKEND": "gateway.cache.ResilientRedisCache",
            "LOCATION": url,
            "RETRY_SECONDS": 30,
            "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.5},
        }
    }


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    if not shutil.which(REDIS_SERVER):
        pytest.skip("needs redis-server")
    server = PrivateRedis()
    yield server
    server.kill()


@pytest.fixture(params=["redis", "redis-down", "local"])
def backend(request) -> Iterator[str]:
    """The same verdicts whatever holds the bookkeeping."""
    if request.param == "redis":
        server = request.getfixturevalue("private_redis")
        caches_setting = redis_caches(server.url)
    elif request.param == "redis-down":
        caches_setting = redis_caches(f"redis://127.0.0.1:{free_port()}/0")
    else:
        caches_setting = LOCAL
    with override_settings(CACHES=caches_setting):
        caches["default"].clear()
        yield request.param


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    current = [1_000_000.0]
    monkeypatch.setattr(health, "now", lambda: current[0])
    return current


def test_two_failures_in_a_row_trip_an_endpoint_until_they_age_out_or_it_succeeds(backend, clock):
    health.health_record(endpoint_id=1, ok=False)
    assert health.endpoint_stats([1])[1].healthy  # one failure is not enough
    health.health_record(endpoint_id=1, ok=False)
    assert not health.endpoint_stats([1])[1].healthy
    assert health.endpoint_stats([2])[2].healthy  # others are untouched
    clock[0] += health.HEALTH_WINDOW + 1
    assert health.endpoint_stats([1])[1].healthy  # the failures aged out
    health.health_record(endpoint_id=1, ok=False)
    health.health_record(endpoint_id=1, ok=False)
    health.health_record(endpoint_id=1, ok=True)
    assert health.endpoint_stats([1])[1].healthy
    health.health_record(endpoint_id=1, ok=False)
    health.health_reset(endpoint_id=1)
    health.health_record(endpoint_id=1, ok=False)
    assert health.endpoint_stats([1])[1].healthy  # the reset forgot the earlier failure


def test_percentiles_come_from_the_successes_of_the_window(backend, clock):
    for n in range(1, 11):
        health.health_record(endpoint_id=7, ok=True, latency_s=n / 10, ttft_s=None, throughput=n * 10)
    health.health_record(endpoint_id=7, ok=False, latency_s=99.0)  # a failure's latency is not a sample
    stats = health.endpoint_stats([7])[7]
    assert stats.samples == 10
    assert stats.latency == {"p50": 0.6, "p75": 0.8, "p90": 1.0, "p99": 1.0}
    assert stats.throughput == {"p50": 60.0, "p75": 80.0, "p90": 100.0, "p99": 100.0}
    assert stats.ttft is None
    clock[0] += health.STATS_WINDOW - 1
    health.health_record(endpoint_id=7, ok=True, latency_s=5.0)
    clock[0] += 2  # the first ten are now older than the window
    assert health.endpoint_stats([7])[7].samples == 1
    assert health.endpoint_stats([7])[7].latency == {"p50": 5.0, "p75": 5.0, "p90": 5.0, "p99": 5.0}


def test_lists_stay_capped_and_lose_nothing_under_concurrent_writers(backend):
    writers, per_writer = 8, 20

    def burst() -> None:
        barrier = threading.Barrier(writers)

        def write(n: int) -> None:
            barrier.wait()
            for i in range(per_writer):
                health.health_record(endpoint_id=3, ok=True, latency_s=float(n * per_writer + i))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    burst()
    assert health.endpoint_stats([3])[3].samples == writers * per_writer  # 160 written at once, 160 kept
    burst()
    health.stats_forget()  # what is stored, not what this process read a moment ago
    assert health.endpoint_stats([3])[3].samples == health.MAX_SAMPLES  # 320 written, the newest 200 kept


def test_one_round_trip_per_attempt_and_per_request(private_redis, monkeypatch):
    calls: list[str] = []
    real_execute = redis.client.Pipeline.execute
    real_command = redis.Redis.execute_command

    def counted_execute(self, *args, **kwargs):
        calls.append("pipeline")
        return real_execute(self, *args, **kwargs)

    def counted_command(self, *args, **kwargs):
        calls.append(str(args[0]))
        return real_command(self, *args, **kwargs)

    with override_settings(CACHES=redis_caches(private_redis.url)):
        health.health_record(endpoint_id=1, ok=True, latency_s=0.1)  # connect and load the scripts outside
        health.endpoint_stats([1])
        monkeypatch.setattr(redis.client.Pipeline, "execute", counted_execute)
        monkeypatch.setattr(redis.Redis, "execute_command", counted_command)
        health.health_record(endpoint_id=1, ok=True, latency_s=0.2, ttft_s=0.05, throughput=30.0)
        assert calls == ["EVALSHA"]  # one script call appends to both lists
        calls.clear()
        health.stats_forget()
        stats = health.endpoint_stats([1, 2, 3])
        assert calls == ["EVALSHA"]  # one script call reads three endpoints
        assert stats[1].samples == 2 and stats[2].samples == 0 and stats[2].latency is None
        assert stats[1].latency == {"p50": 0.2, "p75": 0.2, "p90": 0.2, "p99": 0.2}
        calls.clear()
        health.endpoint_stats([1, 2, 3])
        assert calls == []  # read less than STATS_REFRESH_SECONDS ago: nothing to ask

    raw = private_redis.client()
    with override_settings(CACHES=redis_caches(private_redis.url)):
        for n in range(health.MAX_SAMPLES + 5):
            health.health_record(endpoint_id=9, ok=n % 2 == 0, latency_s=float(n), throughput=1.0)
        for n in range(health.MAX_SAMPLES + 5):
            health.health_record(endpoint_id=9, ok=True, latency_s=float(n), throughput=1.0)

    def size(suffix: str) -> int:
        (key,) = [key for key in raw.keys("*") if key.endswith(f"routing:health:9:{suffix}".encode())]
        assert 0 < raw.ttl(key) <= health.KEPT_SECONDS
        return raw.zcard(key) if suffix in health.MEASURES else raw.llen(key)

    # Every list and sorted set holds exactly what is kept, no more: the evicted samples left the sets too.
    assert size("outcomes") == health.FAILURES_TO_TRIP
    assert size("samples") == size("latency") == size("throughput") == health.MAX_SAMPLES


def test_redis_dying_mid_run_keeps_routing_verdicts_in_process(private_redis):
    with override_settings(CACHES=redis_caches(private_redis.url)):
        health.health_record(endpoint_id=5, ok=True, latency_s=0.3)
        assert health.endpoint_stats([5])[5].samples == 1
        private_redis.kill()
        health.health_record(endpoint_id=5, ok=False)  # no exception: served locally
        health.health_record(endpoint_id=5, ok=False)
        assert not health.endpoint_stats([5])[5].healthy
        assert cache_status()["state"] == "degraded"


def _recorded_elsewhere(endpoint_id: int, ok: bool, latency_s: float | None = None) -> None:
    """An attempt another process recorded: it reaches the shared store, not this process's recent reads."""
    attempt = health.Attempt(endpoint_id, repr(health.now()), ok, (health._number(latency_s), "-", "-"))
    health._shared_or_local(
        lambda shared: health._redis_push(shared, attempt),
        lambda local, extras: health._local_push(local, extras, attempt),
    )


def test_stats_are_reread_within_a_second_and_own_verdict_changes_at_once(backend, clock):
    health.health_record(endpoint_id=5, ok=True, latency_s=1.0)
    assert health.endpoint_stats([5])[5].samples == 1
    _recorded_elsewhere(5, True, latency_s=2.0)
    assert health.endpoint_stats([5])[5].samples == 1  # read less than a second ago
    clock[0] += health.STATS_REFRESH_SECONDS + 0.1
    assert health.endpoint_stats([5])[5].samples == 2
    _recorded_elsewhere(5, False)
    _recorded_elsewhere(5, False)
    assert health.endpoint_stats([5])[5].healthy is True  # not yet seen here
    clock[0] += health.STATS_REFRESH_SECONDS + 0.1
    assert health.endpoint_stats([5])[5].healthy is False  # within the second
    health.health_record(endpoint_id=5, ok=True, latency_s=1.0)
    assert health.endpoint_stats([5])[5].healthy is True  # this process's own success on it: at once
    health.health_record(endpoint_id=5, ok=False)
    health.health_record(endpoint_id=5, ok=False)
    assert health.endpoint_stats([5])[5].healthy is False  # its own failures: at once


@pytest.fixture
def write_behind(settings):
    settings.HEALTH_WRITE_BEHIND = True
    yield health._writer
    health._writer.flush()


def test_write_behind_sends_what_requests_queue_in_batches(backend, write_behind):
    """Production mode: a request only queues its attempt; the process's writer sends them, many per round
    trip, and nothing is lost."""
    for n in range(60):
        health.health_record(endpoint_id=7, ok=True, latency_s=float(n))
    health.health_record(endpoint_id=8, ok=False)
    health.health_record(endpoint_id=8, ok=False)
    write_behind.flush()
    health.stats_forget()  # what reached the store, not this process's view
    stats = health.endpoint_stats([7, 8])
    assert stats[7].samples == 60 and stats[7].latency is not None and stats[7].latency["p99"] == 59.0
    assert stats[8].healthy is False


def test_a_batch_is_one_round_trip_and_survives_a_flushed_script_cache(private_redis, monkeypatch):
    """The write-behind's batch is one pipelined EVALSHA per attempt, without redis-py's SCRIPT EXISTS round trip
    before it; a Redis that lost its scripts (restart, SCRIPT FLUSH) gets the script once and loses no attempt."""
    commands: list[str] = []
    real_send = redis.connection.Connection.send_packed_command

    def counted(self, command, *args, **kwargs):
        packed = b"".join(command) if isinstance(command, list) else command
        commands.extend(word.decode() for word in re.findall(rb"\r\n\$\d+\r\n([A-Z]+)\r\n", b"\r\n" + packed))
        return real_send(self, command, *args, **kwargs)

    with override_settings(CACHES=redis_caches(private_redis.url)):
        health.health_record(endpoint_id=11, ok=True, latency_s=0.1)  # connect and load the script outside
        attempts = [health.Attempt(endpoint_id=11, at=f"{health.now():.3f}", ok=True, measures=("0.2", "-", "-"))] * 3
        monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counted)
        health._push_many(attempts)
        assert "SCRIPT" not in commands and commands.count("EVALSHA") == 3
        private_redis.client().script_flush()
        commands.clear()
        health._push_many(attempts)
        assert commands.count("SCRIPT") == 1 and commands.count("EVALSHA") == 6  # refused, loaded, sent again
        health.stats_forget()
        assert health.endpoint_stats([11])[11].samples == 7
