"""Issue 11: in a gevent worker psycopg waits for its socket on one gevent watcher (gateway/pgwait.py). It must
still let other greenlets run while a query waits, carry queries and results of any size, and fail (not hang)
when the server drops the connection. Run in a child process patched as gunicorn's gevent worker is."""

import os
import subprocess
import sys
import textwrap
import threading
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


FROZEN_CHILD = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()
    import os
    import sys
    import time

    import gevent
    import psycopg
    from psycopg import pq

    from gateway import pgwait

    assert pgwait.install(statement_deadline=1.0)
    frozen = psycopg.connect(os.environ["PGWAIT_TEST_FROZEN"], autocommit=True)  # through the test's proxy
    direct = psycopg.connect(os.environ["PGWAIT_TEST_CONNINFO"], autocommit=True)
    assert frozen.execute("SELECT 1").fetchone() == (1,)
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "frozen"

    ticks = []

    def ticker():
        while True:
            ticks.append(time.monotonic())
            gevent.sleep(0.02)

    clock = gevent.spawn(ticker)
    # Other connections are not held to the frozen one's deadline (a statement longer than it, the server answering)
    slow = gevent.spawn(direct.execute, "SELECT pg_sleep(0.5)")
    started = time.monotonic()
    try:
        frozen.execute("SELECT 2")
    except psycopg.OperationalError as exc:
        failed = exc
    else:
        raise AssertionError("a statement on a frozen connection was answered")
    waited = time.monotonic() - started
    slow.join(timeout=10)
    clock.kill()
    assert slow.successful(), slow.exception
    assert "did not answer within 1 s" in str(failed), failed
    assert 0.9 <= waited < 8, waited  # its deadline, not a hang (a guard, not a measure)
    assert len(ticks) >= 10, len(ticks)  # other greenlets ran while it waited
    # The connection is left mid-exchange and its socket shut down: using it again fails at once, and a pool given it
    # back closes it rather than handing it out again
    assert frozen.pgconn.transaction_status == pq.TransactionStatus.ACTIVE
    try:
        frozen.execute("SELECT 3")
    except psycopg.OperationalError:
        pass
    else:
        raise AssertionError("a connection past its deadline was used again")
    print("gave up", flush=True)
    assert sys.stdin.readline().strip() == "thawed"
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(os.environ["PGWAIT_TEST_FROZEN"], min_size=0, max_size=1, open=True, timeout=5)
    conn = pool.getconn()
    conn.autocommit = True
    print("pooled", flush=True)
    assert sys.stdin.readline().strip() == "frozen"
    try:
        conn.execute("SELECT 4")
    except psycopg.OperationalError:
        pass
    pool.putconn(conn)
    assert conn.closed, "the pool kept a connection its statement gave up on"
    pool.close(timeout=1)
    print("ok")
    """
)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's wait is PostgreSQL's")
@pytest.mark.django_db
def test_a_statement_on_a_frozen_connection_fails_at_its_deadline_and_the_connection_is_not_reused():
    from tests.dbproxy import TcpProxy

    params = connection.get_connection_params()
    wanted = {key: params[key] for key in ("dbname", "host", "port", "user", "password") if params.get(key)}
    proxy = TcpProxy((params.get("host") or "127.0.0.1", int(params.get("port") or 5432)))
    env = {
        **os.environ,
        "PGWAIT_TEST_CONNINFO": make_conninfo(**wanted),
        "PGWAIT_TEST_FROZEN": make_conninfo(**{**wanted, "host": "127.0.0.1", "port": proxy.port}),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", FROZEN_CHILD],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hang_guard = threading.Timer(90, child.kill)  # a child that hangs fails the test (a read would wait for ever)
    hang_guard.start()

    def expect(line: str, *, then: str) -> None:
        assert child.stdin is not None and child.stdout is not None
        said = child.stdout.readline().strip()
        assert said == line, (said, child.stderr.read() if child.stderr and not said else "")
        if then == "frozen":
            proxy.freeze()
        elif then == "thawed":  # its bytes held while frozen now reach the server, as a thawed server reads them
            proxy.restore()
        child.stdin.write(then + "\n")
        child.stdin.flush()

    try:
        # Given a database that stops answering on an open connection (the kernel still acknowledging), a statement
        # on it fails at its deadline; thawed, then frozen again under a pool's connection, the pool drops that one
        expect("ready", then="frozen")
        expect("gave up", then="thawed")
        expect("pooled", then="frozen")
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err[-3000:]
        assert out.strip().endswith("ok"), out
    finally:
        hang_guard.cancel()
        proxy.close()
        if child.poll() is None:
            child.kill()
            child.wait()
