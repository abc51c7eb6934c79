"""The outbound path (issue 11): keep-alive pools per destination and checked address, and the health
write-behind's batches packed by hand. What it must not break: a connection is reused only for its own
destination, a refused address stays refused however often it is asked for, a connection the peer closed is
not reused, and a batch records exactly what one-at-a-time writes record."""

import json
import shutil
import socket
import time
from collections.abc import Iterator

import pytest
from django.test import override_settings

from routing import health, http
from routing.http import destinations
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


def test_small_and_large_bodies_go_out_framed_by_their_length_on_one_connection(servers):
    first, _ = servers
    small = {"text": "x" * 100}
    large = {"text": "y" * (256 * 1024 + 10)}
    for body in (small, large, small):
        post(f"http://127.0.0.1:{first.port}/v1/a", body=body)
    for (head, received), body in zip(first.requests, (small, large, small), strict=True):
        lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
        assert len(lengths) == 1 and int(lengths[0].split(b":")[1]) == len(received)
        assert received.decode() == json.dumps(body, separators=(",", ":"))
        assert b"transfer-encoding" not in head.lower()
    assert first.accepted == 1


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///v1/a", "http://exa mple.com/", "not a url"])
def test_urls_that_cannot_be_sent_fail_the_attempt(url):
    with pytest.raises(http.TransportError) as failed:
        post(url)
    assert failed.value.kind in ("send", "connect")


def test_pools_are_bounded_and_the_oldest_is_closed(servers, monkeypatch):
    monkeypatch.setattr(destinations.Pools, "MAX_POOLS", 2)
    pools = destinations.Pools()
    first, second = servers
    to_first = destinations.target(f"http://127.0.0.1:{first.port}/")
    kept = pools.pool(to_first, "127.0.0.1")
    assert pools.pool(to_first, "127.0.0.1") is kept
    assert pools.pool(destinations.target(f"https://127.0.0.1:{first.port}/"), "127.0.0.1") is not kept  # TLS
    pools.pool(destinations.target(f"http://127.0.0.1:{second.port}/"), "127.0.0.1")
    assert kept.pool is None  # closed: the least recently used of three
    pools.clear()


class ClosingServer(CountingServer):
    """Answers one request per connection, then closes it without saying so (no `Connection: close`)."""

    def serve(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
            self.requests.append((b"", b""))
            time.sleep(0.05)


def test_a_connection_the_peer_closed_is_not_reused():
    server = ClosingServer()
    try:
        url = f"http://127.0.0.1:{server.port}/v1/x"
        for _ in range(3):
            response = post(url)
            assert (response.status_code, response.content) == (200, ANSWER)
            time.sleep(0.2)  # the server has closed its end by now
        assert len(server.requests) == 3  # each call on a new connection, none failed on a dead one
    finally:
        server.close()


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


def test_a_query_or_user_info_in_the_url_does_not_change_the_destination(servers):
    first, _ = servers
    plain = f"http://127.0.0.1:{first.port}/v1/a"
    post(plain)
    post(f"{plain}?key=sk-in-the-query")
    post(f"http://user:sk-in-the-userinfo@127.0.0.1:{first.port}/v1/a")
    assert first.requests[1][0].startswith(b"POST /v1/a?key=sk-in-the-query ")  # the query is still sent
    assert b"sk-in-the-userinfo" not in first.requests[2][0]  # user info is not
    assert first.accepted == 1  # all three: the same destination


@pytest.fixture
def no_resolver(monkeypatch) -> Iterator[list[str]]:
    """The resolver, failing every name and counting the names asked for (under gevent each call is a thread
    hand-off); a numeric address (what urllib3 is handed to connect to) is read as one, never looked up."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def resolve(host, port, family=0, type=0, proto=0, flags=0):
        try:
            return real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "no resolver in this test") from None

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    destinations.forget_resolved()
    yield asked
    destinations.forget_resolved()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "0x7f000001", "2130706433"])
def test_an_address_in_the_url_is_connected_to_without_a_lookup(servers, no_resolver, host):
    first, _ = servers
    assert post(f"http://{host}:{first.port}/v1/a").json() == {"ok": True}
    assert no_resolver == [] and first.accepted == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "0x7f000001", "[::1]", "10.0.0.1", "169.254.169.254"])
def test_a_private_address_in_the_url_is_refused_without_a_lookup(no_resolver, settings, host):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    with pytest.raises(http.ConnectionRefused):
        post(f"http://{host}:9/v1/a", allow_private=False)
    assert no_resolver == []


def test_a_host_name_is_still_resolved(servers, no_resolver):
    first, _ = servers
    with pytest.raises(http.TransportError):
        post(f"http://localhost:{first.port}/v1/a")
    assert no_resolver == ["localhost"] and first.accepted == 0
