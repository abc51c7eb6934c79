"""The PostgreSQL pool pings a connection it hands out at most every CHECK_EVERY_SECONDS, not on every
draw (a request draws twice: it hands its connection back during the upstream call)."""

import pytest
from django.db import connection

from gateway import dbpool


class FakeConnection:
    pass


def test_a_connection_is_pinged_at_most_every_interval(monkeypatch):
    pings: list[object] = []
    clock = [100.0]
    monkeypatch.setattr(dbpool.ConnectionPool, "check_connection", staticmethod(pings.append))
    monkeypatch.setattr(dbpool.time, "monotonic", lambda: clock[0])
    conn = FakeConnection()
    dbpool.check_now_and_then(conn)  # type: ignore[arg-type]
    dbpool.check_now_and_then(conn)  # type: ignore[arg-type]
    clock[0] += dbpool.CHECK_EVERY_SECONDS - 0.1
    dbpool.check_now_and_then(conn)  # type: ignore[arg-type]
    assert pings == [conn]
    clock[0] += 0.2
    dbpool.check_now_and_then(conn)  # type: ignore[arg-type]
    assert pings == [conn, conn]


@pytest.mark.django_db
def test_the_pool_uses_it(settings):
    if connection.vendor != "postgresql" or not settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        pytest.skip("the pool is PostgreSQL's")
    connection.ensure_connection()
    assert connection.pool._check is dbpool.check_now_and_then
