"""Issue 11: in a gevent worker psycopg waits for its socket on one gevent watcher (gateway/pgwait.py). It must
still let other greenlets run while a query waits, carry queries and results of any size, and fail (not hang)
when the server drops the connection. Run in a child process patched as gunicorn's gevent worker is."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.db import connection
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()
    import os
    import time

    import gevent
    import psycopg
    from psycopg import waiting

    from gateway import pgwait

    conninfo = os.environ["PGWAIT_TEST_CONNINFO"]
    assert pgwait.install() and waiting.wait is pgwait.wait_gevent
    assert pgwait.install() and pgwait._fallback is not pgwait.wait_gevent  # installing twice keeps the original

    conns = [psycopg.connect(conninfo, autocommit=True) for _ in range(4)]
    ticks = []

    def ticker():
        while True:
            ticks.append(time.monotonic())
            gevent.sleep(0.02)

    clock = gevent.spawn(ticker)
    started = time.monotonic()
    gevent.joinall([gevent.spawn(c.execute, "SELECT pg_sleep(0.4)") for c in conns], raise_error=True)
    elapsed = time.monotonic() - started
    clock.kill()
    print("parallel", round(elapsed, 3), "ticks", len(ticks))
    assert elapsed < 1.2, elapsed  # 1.6 s if each query blocked the worker
    assert len(ticks) >= 10, len(ticks)  # the other greenlet ran while the queries waited

    # A parameter larger than the socket's buffer (written in several waits for the socket to drain) and a large
    # result (read in several), with prepared and unprepared statements
    big = "x" * (8 * 1024 * 1024)
    for prepare in (False, True):
        row = conns[0].execute("SELECT length(%s::text), md5(%s::text)", [big, big], prepare=prepare).fetchone()
        assert row[0] == len(big), row
        many = "SELECT g, repeat('y', 100) FROM generate_series(1, 50000) g"
        rows = conns[1].execute(many, prepare=prepare).fetchall()
        assert len(rows) == 50000 and rows[-1][0] == 50000

    # A connection the server drops while its query waits: an error, not a hang
    victim = psycopg.connect(conninfo, autocommit=True)
    pid = victim.info.backend_pid
    waiting_query = gevent.spawn(victim.execute, "SELECT pg_sleep(30)")
    gevent.sleep(0.3)
    conns[2].execute("SELECT pg_terminate_backend(%s)", [pid])
    waiting_query.join(timeout=5)
    assert waiting_query.ready(), "the query still waits on a dropped connection"
    assert isinstance(waiting_query.exception, psycopg.OperationalError), repr(waiting_query.exception)

    # A wait with a deadline (psycopg's own timeouts) goes to the wait it replaced, which still works
    from psycopg import generators

    pgconn = conns[3].pgconn
    pgconn.send_query(b"SELECT 41 + 1")
    results = pgwait.wait_gevent(generators.execute(pgconn), pgconn.socket, timeout=5.0)
    assert results[-1].get_value(0, 0) == b"42", results
    print("ok")
    """
)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's wait is PostgreSQL's")
@pytest.mark.django_db
def test_queries_in_a_gevent_worker_wait_cooperatively_and_fail_on_a_dropped_connection():
    params = connection.get_connection_params()
    wanted = {key: params[key] for key in ("dbname", "host", "port", "user", "password") if params.get(key)}
    env = {**os.environ, "PGWAIT_TEST_CONNINFO": make_conninfo(**wanted)}  # (not on the command line: a password)
    child = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip().endswith("ok"), child.stdout


def test_without_gevent_psycopgs_own_wait_stands():
    from psycopg import waiting

    from gateway import pgwait

    assert "gevent.monkey" not in sys.modules or not sys.modules["gevent.monkey"].is_module_patched("select")
    assert pgwait.install() is False
    assert waiting.wait is not pgwait.wait_gevent
