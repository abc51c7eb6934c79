"""Database outages (issue 28, item 6) on a real gunicorn gateway whose PostgreSQL is behind a loopback TCP proxy
(tests/dbproxy.py) that the test cuts (down) or freezes (connections open, nothing answered): a request whose
settlement failed in the outage is charged once when the database is back, a request without usage has its hold
released, and a frozen database answers requests with 503 in seconds and /readyz in about one. The bounds asserted
on durations are hang guards, far above what is expected, not performance figures."""

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import TypeVar

import psycopg
import pytest
import requests
from django.db import connection

from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from tests.billing.books import assert_books
from tests.dbproxy import TcpProxy
from tests.live import LiveGateway
from tests.live import test_database_url as database_url
from tests.support import Persona

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL outage, through a TCP proxy"),
]
T = TypeVar("T")


def persona(name: str) -> Persona:
    return Persona(account_provision(name=name, plan="payg", credits=Decimal("5")))


def ask(
    gateway: LiveGateway, who: Persona, directive: dict, *, stream: bool = False, timeout: float = 60
) -> requests.Response:
    response = requests.post(
        f"{gateway.api}/responses",
        json={"model": "standin/echo", "input": f"Hi <<standin {json.dumps(directive)}>>", "stream": stream},
        timeout=timeout,
        headers={"Authorization": f"Bearer {who.api_key}"},
    )
    response.content  # noqa: B018  # read whole (a stream: to its end)
    return response


def wait_for(found: Callable[[], T | None], *, timeout: float = 30) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value is not None:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s")


def open_hold(who: Persona) -> Generation | None:
    return Generation.objects.filter(account_id=who.account_id, status=IN_PROGRESS).first()


@pytest.fixture
def outage(transactional_db, standin_catalog) -> Iterator[tuple[TcpProxy, LiveGateway]]:
    """A gateway (one worker) whose database connections all go through the proxy."""
    db = connection.settings_dict
    proxy = TcpProxy((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)))
    url = database_url().replace(f":{db.get('PORT') or 5432}/", f":{proxy.port}/")
    # The in-process caches (keys, catalog, plugin defaults) kept for a minute, as a quiet deployment has them: the
    # settlement is then the request's only statement after its upstream call (where the outage strikes).
    env = {"DATABASE_URL": url, "GUNICORN_WARM_DB_CONNECTIONS": "1", "CACHE_VERSION_CHECK_SECONDS": "60"}
    gateway = LiveGateway(workers=1, threads=8, extra_env=env)
    try:
        yield proxy, gateway
    finally:
        gateway.stop()
        proxy.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_settlement_that_failed_in_an_outage_is_charged_once_the_database_is_back(outage, stream):
    proxy, gateway = outage
    mia = persona("mia")
    # Given a request whose hold is open (its upstream answers in 2 s) when the database goes down
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(ask, gateway, mia, {"latency_ms": 2000, "output_tokens": 7}, stream=stream)
        hold = wait_for(lambda: open_hold(mia))
        proxy.cut()
        response = answer.result()
    # Then its settlement cannot be written: 503 (a stream: its answer was sent, then the error), the hold open
    if stream:
        assert response.status_code == 200 and b"response.output_text.delta" in response.content
        assert b"event: response.completed" not in response.content
    else:
        assert response.status_code == 503, response.text
    assert Generation.objects.get(pk=hold.id).status == IN_PROGRESS
    # When the database is back
    proxy.restore()
    # Then the gateway settles it with the usage it had: charged once, nothing held
    settled = wait_for(lambda: Generation.objects.exclude(status=IN_PROGRESS).filter(pk=hold.id).first())
    assert (settled.status, settled.tokens_output) == ("completed", 7) and settled.cost > 0
    assert LedgerEntry.objects.filter(generation_id=hold.id, kind=EntryKind.CHARGE).count() == 1
    account = assert_books(mia.account_id)
    assert (account.balance, account.reserved) == (Decimal(5) - settled.cost, 0)
    # And the gateway serves again
    again = ask(gateway, mia, {})
    assert again.status_code == 200, again.text


def test_the_hold_of_a_request_that_got_no_usage_is_released_once_the_database_is_back(outage):
    proxy, gateway = outage
    noor = persona("noor")
    # Given a request whose upstream fails (no usage), its hold open when the database goes down
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(ask, gateway, noor, {"latency_ms": 2000, "status": 400})
        hold = wait_for(lambda: open_hold(noor))
        proxy.cut()
        response = answer.result()
    assert response.status_code == 503, response.text
    # When the database is back
    proxy.restore()
    # Then its hold is released, nothing charged
    released = wait_for(lambda: Generation.objects.exclude(status=IN_PROGRESS).filter(pk=hold.id).first())
    assert (released.status, released.cost) == ("failed", 0)
    assert not LedgerEntry.objects.filter(generation_id=hold.id).exists()
    account = assert_books(noor.account_id)
    assert (account.balance, account.reserved) == (Decimal(5), 0)


def test_readyz_answers_within_about_a_second_when_the_database_is_frozen(outage):
    proxy, gateway = outage
    assert requests.get(f"{gateway.url}/readyz", timeout=10).status_code == 200
    # Given a database that stops answering, its connections left open
    proxy.freeze()
    try:
        # When /readyz is asked (twice: the second while the first check still waits), then it says unavailable
        # in about a second each time
        for _ in range(2):
            started = time.monotonic()
            ready = requests.get(f"{gateway.url}/readyz", timeout=30)
            assert time.monotonic() - started < 3
            assert ready.status_code == 503 and ready.json()["checks"]["database"] == "unavailable"
    finally:
        proxy.restore()
    # And once the database answers again, so does /readyz
    wait_for(lambda: True if requests.get(f"{gateway.url}/readyz", timeout=10).status_code == 200 else None)


def test_a_stalled_database_answers_requests_with_503_in_seconds(outage):
    _, gateway = outage
    omar = persona("omar")
    assert ask(gateway, omar, {}).status_code == 200  # the key and the catalog are known, a connection is pooled
    # Given a database that answers nothing the request asks (its tables locked by another session for 30 s)
    db = connection.settings_dict
    with psycopg.connect(
        host=db.get("HOST") or "127.0.0.1", port=db.get("PORT") or 5432, user=db.get("USER"), dbname=db["NAME"]
    ) as locker:
        locker.execute("LOCK TABLE accounts_account, billing_generation IN ACCESS EXCLUSIVE MODE")
        # When a request comes, then it is answered 503 (with Retry-After) within seconds, not when the lock goes
        started = time.monotonic()
        response = ask(gateway, omar, {})
        assert time.monotonic() - started < 10
        assert response.status_code == 503 and response.headers["Retry-After"], response.text
        locker.rollback()
    # And nothing of it is held; the next request is served
    assert not Generation.objects.filter(account_id=omar.account_id, status=IN_PROGRESS).exists()
    assert ask(gateway, omar, {}).status_code == 200
    assert assert_books(omar.account_id).reserved == 0


def test_a_frozen_database_on_an_open_connection_answers_503_in_seconds_and_serves_once_it_thaws(outage):
    proxy, gateway = outage
    pia = persona("pia")
    # Given a gateway that served a request, its database connection open and pooled
    assert ask(gateway, pia, {}).status_code == 200
    # When the database freezes on that connection (the kernel still acknowledges what is sent, so neither the
    # server's statement_timeout nor TCP's own timeouts can fire) and a request comes
    proxy.freeze()
    try:
        started = time.monotonic()
        response = ask(gateway, pia, {}, timeout=30)
        # Then it is answered 503 (with Retry-After) within seconds (the statement's deadline on the client side),
        # not when the database answers again
        assert time.monotonic() - started < 15
        assert response.status_code == 503 and response.headers["Retry-After"], response.text
    finally:
        proxy.restore()
    # And once the database answers again, requests are served (the connection the frozen statement left in the
    # middle of its exchange is not handed out again) and nothing stays held: the statement the client gave up on
    # (held by the proxy, relayed when it thawed) is released if the server ran it, no credit lost
    wait_for(lambda: True if ask(gateway, pia, {}, timeout=30).status_code == 200 else None)
    assert ask(gateway, pia, {}).status_code == 200
    wait_for(lambda: None if open_hold(pia) else True)
    account = assert_books(pia.account_id)
    charged = sum(g.cost for g in Generation.objects.filter(account_id=pia.account_id))
    assert (account.balance, account.reserved) == (Decimal(5) - charged, 0)
