"""The outbound fast path (issue 11): keep-alive pools per destination and policy without urllib3's PoolManager,
the request head and body in one send, and the health write-behind's batches packed by hand. What it must not
break: a connection is reused only for its own destination and address policy, a refused address stays refused
however often it is asked for, and a batch records exactly what one-at-a-time writes record."""

import shutil
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from django.test import override_settings

from routing import health, http
from tests.live import REDIS_SERVER, PrivateRedis
from tests.support import LoopbackServer, requests_on

ANSWER = b'{"ok":true}'


class CountingServer(LoopbackServer):
    """Answers every request with ANSWER on keep-alive connections; counts the connections it accepted and keeps
    each request (head and body) it read."""

    def __init__(self, host: str = "127.0.0.1"):
        self.requests: list[tuple[bytes, bytes]] = []
        super().__init__(host)

    def serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                for head, body in requests_on(conn):
                    self.requests.append((head, body))
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                        % (len(ANSWER), ANSWER)
                    )
            except OSError:
                return


@pytest.fixture
def servers() -> Iterator[tuple[CountingServer, CountingServer]]:
    first, second = CountingServer(), CountingServer()
    yield first, second
    first.close()
    second.close()


def post(url: str, *, allow_private: bool = True, body: dict | None = None) -> http.Response:
    return http.request(
        "POST",
        url,
        headers={"Authorization": "Bearer sk-fastpath"},
        json_body=body or {"n": 1},
        allow_private=allow_private,
    )


def test_connections_are_reused_only_for_their_own_destination(servers):
    first, second = servers
    for _ in range(3):
        assert post(f"http://127.0.0.1:{first.port}/v1/a").json() == {"ok": True}
        assert post(f"http://127.0.0.1:{second.port}/v1/b").json() == {"ok": True}
    assert (first.accepted, second.accepted) == (1, 1)  # one kept connection each, none handed across
    post(f"http://localhost:{first.port}/v1/a")  # another host name is another destination, even at one address
    assert first.accepted == 2
    assert len(first.requests) == 4 and all(head.startswith(b"POST /v1/a ") for head, _ in first.requests)
    assert all(head.startswith(b"POST /v1/b ") for head, _ in second.requests)


def test_a_refused_address_stays_refused_and_never_gets_a_connection_made_under_another_policy(servers, settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    first, _ = servers
    url = f"http://127.0.0.1:{first.port}/v1/a"
    for _ in range(3):  # the destination is known, its pool exists: every new connection is checked again
        with pytest.raises(http.ConnectionRefused):
            post(url, allow_private=False)
    assert first.accepted == 0
    assert post(url, allow_private=True).json() == {"ok": True}  # a provider allowed on the private network
    assert first.accepted == 1
    with pytest.raises(http.ConnectionRefused):  # that pooled connection is not the public-only policy's
        post(url, allow_private=False)
    assert first.accepted == 1 and len(first.requests) == 1


def test_the_body_goes_with_the_head_once_framed_and_large_bodies_as_before(servers):
    first, _ = servers
    small = {"text": "x" * 100}
    large = {"text": "y" * (http.JOINED_BODY_MAX + 10)}
    for body in (small, large, small):
        post(f"http://127.0.0.1:{first.port}/v1/a", body=body)
    for (head, received), body in zip(first.requests, (small, large, small), strict=True):
        lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
        assert len(lengths) == 1 and int(lengths[0].split(b":")[1]) == len(received)
        assert received.decode() == http.json.dumps(body, separators=(",", ":"))
        assert b"transfer-encoding" not in head.lower()
    assert first.accepted == 1


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///v1/a", "http://exa mple.com/", "not a url"])
def test_urls_that_cannot_be_sent_fail_the_attempt(url):
    with pytest.raises(http.TransportError) as failed:
        post(url)
    assert failed.value.kind in ("send", "connect")


def test_pools_are_bounded_and_the_oldest_is_closed(servers, monkeypatch):
    monkeypatch.setattr(http._Pools, "MAX_POOLS", 2)
    pools = http._Pools(guarded=False)
    first, second = servers
    kept = pools.pool(("http", "127.0.0.1", first.port))
    assert pools.pool(("http", "127.0.0.1", first.port)) is kept
    assert pools.pool(("https", "127.0.0.1", first.port)) is not kept  # TLS is another pool
    pools.pool(("http", "127.0.0.1", second.port))
    assert kept.pool is None  # closed: the least recently used of three
    pools.clear()


# ---- health batches ----------------------------------------------------------------------------------------


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    if not shutil.which(REDIS_SERVER):
        pytest.skip("needs redis-server")
    server = PrivateRedis()
    with override_settings(
        CACHES={
            "default": {
                "BACKEND": "gateway.cache.ResilientRedisCache",
                "LOCATION": server.url,
                "RETRY_SECONDS": 30,
                "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.5},
            }
        }
    ):
        health.stats_forget()
        yield server
    health.stats_forget()
    server.kill()


def stored(server: PrivateRedis, endpoint_id: int) -> dict:
    """What Redis holds for an endpoint, sample ids left out (each writer numbers its own)."""
    raw = server.client()
    keys = {key.decode().rsplit(":", 1)[-1]: key for key in raw.keys(f"*routing:health:{endpoint_id}:*")}
    return {
        "outcomes": raw.lrange(keys["outcomes"], 0, -1),
        "samples": [item.split(b" ", 1)[1] for item in raw.lrange(keys["samples"], 0, -1)],
        **{
            m: [score for _, score in raw.zrange(keys[m], 0, -1, withscores=True)] for m in health.MEASURES if m in keys
        },
    }


def attempts_for(endpoint_id: int) -> list[health.Attempt]:
    made = []
    for n in range(health.MAX_SAMPLES * 2):
        ok = n % 7 != 3
        measures = (repr(n / 100), "-" if n % 2 else repr(n / 1000), repr(float(n)))
        made.append(health.Attempt(endpoint_id, repr(1_000_000.0 + n), ok, measures if n % 5 else ("-", "-", "-")))
    return made


def test_a_batch_stores_exactly_what_one_at_a_time_writes_store(private_redis):
    one_by_one, batched = 21, 22
    for attempt in attempts_for(one_by_one):
        health._shared_or_local(lambda backend, a=attempt: health._redis_push(backend, a), lambda *_: None)
    batch = [health.Attempt(batched, a.at, a.ok, a.measures) for a in attempts_for(one_by_one)]
    for start in range(0, len(batch), 37):  # batches of several sizes, one endpoint's attempts mixed in order
        health._push_many(batch[start : start + 37])
    assert stored(private_redis, batched) == stored(private_redis, one_by_one)
    assert len(stored(private_redis, batched)["samples"]) == health.MAX_SAMPLES


def test_a_batch_over_many_endpoints_counts_each_exactly(private_redis):
    attempts = []
    for n in range(90):
        endpoint_id = 30 + n % 3
        attempts.append(health.Attempt(endpoint_id, repr(health.now()), endpoint_id != 32, (repr(n / 10), "-", "-")))
    health._push_many(attempts)
    stats = health.endpoint_stats([30, 31, 32])
    assert [stats[i].samples for i in (30, 31, 32)] == [30, 30, 0]  # a failure's measures are not a sample
    assert stats[30].healthy and stats[31].healthy and not stats[32].healthy
    assert stats[30].latency is not None and stats[30].latency["p99"] == 8.7  # the largest of 0.0, 0.3, ... 8.7


def test_urls_that_may_hold_a_credential_are_not_remembered(servers):
    first, _ = servers
    plain = f"http://127.0.0.1:{first.port}/v1/a"
    post(plain)
    post(f"{plain}?key=sk-in-the-query")
    post(f"http://user:sk-in-the-userinfo@127.0.0.1:{first.port}/v1/a")
    assert plain in http._DESTINATIONS
    assert not [url for url in http._DESTINATIONS if "sk-in-the" in url]
    assert first.requests[1][0].startswith(b"POST /v1/a?key=sk-in-the-query ")  # the query is still sent
    assert first.accepted == 1  # all three: the same destination


def test_a_deadline_too_far_to_wait_for_does_not_stop_the_watchdog():
    # Given a watch whose deadline is further away than a wait can be (a setting meaning "never"), armed first
    watchdog = http._Watchdog()
    far = http._Watch()
    watchdog.arm(far, time.monotonic() + 1e12)
    time.sleep(0.1)  # the watchdog thread now waits for the far deadline
    # When a near deadline is armed behind it, then it still fires
    try:
        assert_cut_on_time(watchdog)
    finally:
        watchdog.disarm(far)


@pytest.fixture
def no_resolver(monkeypatch) -> list[str]:
    """The resolver, failing and counting the names asked for (under gevent each call is a thread hand-off)."""
    asked: list[str] = []

    def resolve(host, *args, **kwargs):
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no resolver in this test")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return asked


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "0x7f000001", "2130706433"])
def test_an_address_in_the_url_is_connected_to_without_the_resolver(servers, no_resolver, host):
    first, _ = servers
    assert post(f"http://{host}:{first.port}/v1/a").json() == {"ok": True}
    assert no_resolver == [] and first.accepted == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "0x7f000001", "[::1]", "10.0.0.1", "169.254.169.254"])
def test_a_private_address_in_the_url_is_refused_without_the_resolver(no_resolver, settings, host):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    with pytest.raises(http.ConnectionRefused):
        post(f"http://{host}:9/v1/a", allow_private=False)
    assert no_resolver == []


def test_a_host_name_is_still_resolved(servers, no_resolver):
    first, _ = servers
    with pytest.raises(http.TransportError):
        post(f"http://localhost:{first.port}/v1/a")
    assert no_resolver == ["localhost"] and first.accepted == 0


def assert_cut_on_time(watchdog: http._Watchdog) -> None:
    """A call armed with a deadline 0.1 s away has its socket cut, and a live thread did it."""
    near = http._Watch()
    left, right = socket.socketpair()
    try:
        near.sock = left
        watchdog.arm(near, time.monotonic() + 0.1)
        deadline = time.monotonic() + 5
        while not near.fired and time.monotonic() < deadline:
            time.sleep(0.02)
        assert near.fired and watchdog._thread is not None and watchdog._thread.is_alive()
    finally:
        watchdog.disarm(near)
        left.close()
        right.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_watchdog_whose_thread_ended_starts_another_on_the_next_arm(monkeypatch):
    # Given a watchdog whose thread ends at once (a defect in it: nothing should end it)
    watchdog = http._Watchdog()
    ended: list[bool] = []
    watching = http._Watchdog._run

    def ending_once(self):
        if not ended:
            ended.append(True)
            raise RuntimeError("the watchdog's loop broke")
        return watching(self)

    monkeypatch.setattr(http._Watchdog, "_run", ending_once)
    watchdog.arm(http._Watch(), time.monotonic() + 60)
    deadline = time.monotonic() + 5
    while watchdog._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended and not watchdog._thread.is_alive()
    # When the next call arms its deadline, then a new thread watches it and cuts the call on time
    assert_cut_on_time(watchdog)


def test_a_watchdog_thread_that_could_not_start_is_started_by_the_next_arm(monkeypatch):
    # Given a process that cannot start a thread once (a thread or process limit reached)
    refused: list[bool] = []

    class Refusing(threading.Thread):
        def start(self):
            if not refused:
                refused.append(True)
                raise RuntimeError("can't start new thread")
            super().start()

    monkeypatch.setattr(http.threading, "Thread", Refusing)
    watchdog = http._Watchdog()
    with pytest.raises(RuntimeError):
        watchdog.arm(http._Watch(), time.monotonic() + 60)
    assert refused and watchdog._thread is None  # (it was never recorded)
    # When the next call arms its deadline, then a thread starts and cuts that call on time
    assert_cut_on_time(watchdog)
