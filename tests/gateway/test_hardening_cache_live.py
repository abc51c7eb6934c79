"""Redis down, or dying mid-flight, does not fail requests (issue 9, item 5), and the rate limit admits
exactly its limit under concurrency across workers (item 15). Real gunicorn (2 workers), PostgreSQL, the
stand-in provider and private redis-servers on loopback."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest
import requests
from django.db.models import Sum

from gateway.accounts.keys import key_hash
from gateway.accounts.models import Account
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from tests.live import LiveGateway, PrivateRedis, free_port
from tests.support import Persona, assert_error_envelope

pytestmark = pytest.mark.live
RETRY_SECONDS = 1


def persona(name: str) -> Persona:
    return Persona(account_provision(name=name, plan="payg", credits=Decimal("5")))


def ask(
    gateway: LiveGateway,
    who: Persona,
    *,
    stream: bool = False,
    directive: dict | None = None,
    session_id: str | None = None,
) -> requests.Response:
    text = "Hi" + (f" <<standin {json.dumps(directive)}>>" if directive else "")
    body = {"model": "standin/echo", "input": text, "stream": stream}
    if session_id:
        body["session_id"] = session_id
    return requests.post(
        f"{gateway.api}/responses",
        json=body,
        stream=stream,
        timeout=30,
        headers={"Authorization": f"Bearer {who.api_key}"},
    )


def stream_events(response: requests.Response, started: threading.Event | None = None) -> list[str]:
    """The event types of an SSE response, read to its end; `started` is set at the first text delta."""
    events = []
    for line in response.iter_lines():
        if line.startswith(b"event: "):
            events.append(line[7:].decode())
            if started is not None and events[-1] == "response.output_text.delta":
                started.set()
    return events


def assert_books_balance(who: Persona, generation_ids: list[str]) -> None:
    """Every request charged exactly once, nothing still held, balance == sum of the ledger."""
    assert len(set(generation_ids)) == len(generation_ids)
    assert Generation.objects.filter(account_id=who.account_id).count() == len(generation_ids)
    assert set(Generation.objects.filter(account_id=who.account_id).values_list("id", flat=True)) == set(generation_ids)
    for generation_id in generation_ids:
        assert LedgerEntry.objects.filter(generation_id=generation_id, kind=EntryKind.CHARGE).count() == 1
    assert not Generation.objects.filter(account_id=who.account_id, status=IN_PROGRESS).exists()
    ledger = LedgerEntry.objects.filter(account_id=who.account_id).aggregate(total=Sum("amount"))["total"]
    assert Account.objects.get(pk=who.account_id).balance == ledger < Decimal("5")
    assert Account.objects.get(pk=who.account_id).reserved == 0


def gateway_log(gateway: LiveGateway) -> str:
    gateway.log.flush()
    return Path(gateway.log.name).read_text()


def test_dead_redis_inference_still_works_and_readyz_says_degraded(transactional_db, standin_catalog):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    gateway = LiveGateway(workers=2, threads=8, extra_env={"REDIS_URL": dead, "GATEWAY_RATE_LIMIT": "100/min"})
    try:
        lena = persona("lena")
        # When requests (JSON, stream, with a session) run while Redis is unreachable, they succeed
        answer = ask(gateway, lena, session_id="s-1")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed"
        streamed = ask(gateway, lena, stream=True, session_id="s-1")
        assert streamed.status_code == 200
        events = stream_events(streamed)
        assert events[-1] == "response.completed" and "response.failed" not in events
        again = ask(gateway, lena, session_id="s-1")
        assert again.status_code == 200, again.text
        assert_books_balance(lena, [r.headers["X-Generation-Id"] for r in (answer, streamed, again)])
        # And /readyz says the cache is degraded, the service ready
        ready = requests.get(f"{gateway.url}/readyz", timeout=5)
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"database": "ok", "cache": "degraded"}
        details = ready.json()["details"]["cache"]
        assert details["backend"] == "redis" and details["errors"] >= 1 and details["outages"] == 1
    finally:
        gateway.stop()


def test_database_down_is_still_not_ready(transactional_db):
    # Given a gateway whose database and Redis are both unreachable (no pool: the connection fails at once)
    gateway = LiveGateway(
        workers=1,
        threads=4,
        extra_env={
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nowhere",
            "DB_POOL": "false",
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        },
    )
    try:
        # Then /readyz is 503 for the database, and reports the cache as degraded
        ready = requests.get(f"{gateway.url}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.json()["checks"] == {"database": "unavailable", "cache": "degraded"}
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def redis_gateway(django_db_setup, django_db_blocker):
    """A private redis-server and a 2-worker gateway using it, with a rate limit of 20/min per key."""
    server = PrivateRedis()
    gateway = LiveGateway(
        workers=2,
        threads=16,
        extra_env={"REDIS_URL": server.url, "GATEWAY_RATE_LIMIT": "20/min", "REDIS_RETRY_SECONDS": str(RETRY_SECONDS)},
    )
    yield server, gateway, {"restarted_at": 0.0}
    gateway.stop()
    server.kill()


def test_rate_limit_admits_exactly_the_limit_across_workers(transactional_db, standin_catalog, redis_gateway):
    server, gateway, state = redis_gateway
    # If the outage test ran before, every worker is back on Redis after its back-off
    time.sleep(max(0.0, state["restarted_at"] + RETRY_SECONDS + 0.2 - time.monotonic()))
    mia = persona("mia")
    # When 100 requests of one key arrive at once, against a limit of 20 a minute
    barrier = threading.Barrier(100)

    def send(_):
        barrier.wait()
        return ask(gateway, mia)

    with ThreadPoolExecutor(max_workers=100) as pool:
        responses = list(pool.map(send, range(100)))
    # Then exactly 20 are served and 80 refused with 429, Retry-After and the spec's error body
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 20 and statuses.count(429) == 80, sorted(statuses)
    for refused in (r for r in responses if r.status_code == 429):
        assert_error_envelope(refused, 429)
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert int(server.client().get(f":1:throttle_api_key_{key_hash(mia.api_key)}")) == 100
    assert_books_balance(mia, [r.headers["X-Generation-Id"] for r in responses if r.status_code == 200])


def test_redis_dying_mid_flight_loses_and_double_bills_nothing(transactional_db, standin_catalog, redis_gateway):
    server, gateway, state = redis_gateway
    nina, omar = persona("nina"), persona("omar")
    log_before = gateway_log(gateway).count("Redis unavailable")
    # Given slow JSON answers (2 s before the first byte) and slow streams (30 chunks, 100 ms apart) in flight
    results: dict[str, list] = {"json": [], "stream": []}
    stream_started = [threading.Event() for _ in range(6)]

    def json_request(n: int) -> None:
        response = ask(gateway, nina, directive={"latency_ms": 2000}, session_id=f"j-{n % 2}")
        results["json"].append((response.status_code, response.headers.get("X-Generation-Id"), response.text))

    def stream_request(n: int) -> None:
        try:
            response = ask(
                gateway, omar, stream=True, session_id=f"s-{n % 2}", directive={"chunks": 30, "interval_ms": 100}
            )
            results["stream"].append(
                (
                    response.status_code,
                    response.headers.get("X-Generation-Id"),
                    stream_events(response, stream_started[n]),
                )
            )
        finally:
            stream_started[n].set()  # a stream that failed early does not keep the test waiting

    threads = [threading.Thread(target=json_request, args=(n,)) for n in range(6)]
    threads += [threading.Thread(target=stream_request, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for started in stream_started:
        assert started.wait(timeout=15)
    deadline = time.monotonic() + 10
    while (
        len(
            standin_catalog.requests_for("/responses")
            + standin_catalog.requests_for("/completions")
            + standin_catalog.requests_for("/messages")
        )
        < 12
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    # When Redis dies while they are all upstream
    server.kill()
    for thread in threads:
        thread.join(timeout=30)
    # Then every JSON request answered 200 and every stream ended with response.completed
    assert len(results["json"]) == 6 and len(results["stream"]) == 6
    for status, _, text in results["json"]:
        assert status == 200, text
        assert json.loads(text)["status"] == "completed"
    for status, _, events in results["stream"]:
        assert status == 200
        assert events[-1] == "response.completed" and "response.failed" not in events, events
    # And the books balance: each request charged once, no hold left, one generation record each
    assert_books_balance(nina, [generation for _, generation, _ in results["json"]])
    assert_books_balance(omar, [generation for _, generation, _ in results["stream"]])
    # And the outage was logged once per worker that saw it, not once per call
    assert 1 <= gateway_log(gateway).count("Redis unavailable") - log_before <= 2
    # When Redis comes back, after the back-off the gateway uses it again by itself
    server.start()
    state["restarted_at"] = time.monotonic()
    time.sleep(RETRY_SECONDS + 0.2)
    paul = persona("paul")
    for _ in range(4):
        response = ask(gateway, paul, session_id="p")
        assert response.status_code == 200, response.text
    raw = server.client()
    assert int(raw.get(f":1:throttle_api_key_{key_hash(paul.api_key)}")) == 4
    assert raw.keys(":1:routing:sticky:*")
    # (health attempts go to Redis from each worker's write-behind thread, gathered for up to a tenth of a second)
    deadline = time.monotonic() + 5
    while not raw.keys(":1:routing:health:*:samples") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert raw.keys(":1:routing:health:*:samples")
    ready = requests.get(f"{gateway.url}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["checks"]["cache"] == "ok"
