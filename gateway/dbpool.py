"""The check the PostgreSQL pool runs on a connection it hands out, and cursors for statements prepared once per
connection.

psycopg_pool's own check (Django's CONN_HEALTH_CHECKS) costs a round trip every time a connection leaves the
pool, and a request takes one twice (it hands its connection back during the upstream call). This one pings a
connection at most every CHECK_EVERY_SECONDS: a connection that died since (a database restart) fails the
one request that drew it, and the pool replaces it. Django builds the pool itself and passes its own `check`,
so the settings turn Django's off and `pool_check_install` puts this one on the pool when the first
connection is made."""

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.signals import connection_created
from django.db.backends.utils import CursorWrapper
from django.dispatch import receiver
from psycopg import Connection, Cursor
from psycopg_pool import ConnectionPool

CHECK_EVERY_SECONDS = 5.0


def check_now_and_then(conn: Connection) -> None:
    now = time.monotonic()
    if now - getattr(conn, "_gateway_checked_at", -math.inf) < CHECK_EVERY_SECONDS:
        return
    ConnectionPool.check_connection(conn)
    conn._gateway_checked_at = now  # type: ignore[attr-defined]  # the pool's connections are ours to tag


@receiver(connection_created)
def pool_check_install(sender, connection, **kwargs) -> None:
    pool = getattr(connection, "pool", None)
    if pool is not None and getattr(pool, "_check", check_now_and_then) is not check_now_and_then:
        pool._check = check_now_and_then  # psycopg_pool keeps the `check` argument here


@contextmanager
def prepared_cursor(statement: str = "") -> Iterator[CursorWrapper]:
    """A cursor whose statements PostgreSQL parses and plans once per connection, then runs from the prepared plan:
    for the hot path's fixed statements (a request's hold and its settlement). The parameters are bound on the
    server (a statement must be one statement). Django's cursors bind them on the client and send every statement
    as new text; they stay the default for the ORM. The settings turn preparing on (OPTIONS prepare_threshold 0,
    DB_PREPARED_STATEMENTS); without it (SQLite, or PostgreSQL behind a pooler that cannot keep prepared
    statements) this is an ordinary cursor.

    With a pool and no connection open in this thread, the statement runs on a connection borrowed from the pool
    for just this statement and handed straight back: what Django's own connect and close would do around it
    (settings read, signals sent, autocommit and time zone checked: a fifth of a statement's CPU) is not needed for
    one statement in autocommit on a connection the pool configured (autocommit is the one setting a connection can
    come back without: it is turned on again), and the connection's cursor for `statement` (a name: the hold's, the
    settlement's) is used again (_kept_cursor), in Django's wrapper only while something watches the queries
    (DEBUG's log, a test's capture, an execute wrapper); its errors are Django's either way. An open connection (a
    transaction, or the ORM used earlier in the request) is used as it is, with a new cursor in Django's wrapper."""
    db = connections[DEFAULT_DB_ALIAS]  # once: each `connection.x` looks the connection up again
    if db.vendor != "postgresql" or db.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        with db.cursor() as cursor:
            yield cursor
        return
    pool = getattr(db, "pool", None)  # PostgreSQL's, when configured
    if pool is None or db.connection is not None or db.in_atomic_block:  # (atomic, closed: Django refuses)
        db.ensure_connection()
        with db.wrap_database_errors:
            # _prepare_cursor: what Django's own cursor() does with the cursor it creates (wrapped, counted, logged)
            wrapped = db._prepare_cursor(Cursor(db.connection))  # type: ignore[attr-defined]
        with wrapped:
            yield wrapped
        return
    with db.wrap_database_errors:
        if pool.closed:  # nothing opened it yet (Django opens it on its first connection)
            pool.open()
        if pool._check is not check_now_and_then:  # as pool_check_install does for Django's connections
            pool._check = check_now_and_then
        raw = pool.getconn()
    try:
        with db.wrap_database_errors:
            if not raw.autocommit:  # handed back by a Django connection that left it off (Django's connect sets it)
                raw.autocommit = True
        kept = _kept_cursor(raw, statement)
        if db.queries_logged or db.execute_wrappers:  # DEBUG, a test capturing queries, an execute_wrapper
            yield db._prepare_cursor(kept)  # type: ignore[attr-defined]  # not closed: the connection keeps it
        else:
            with db.wrap_database_errors:
                yield cast(CursorWrapper, kept)  # the wrapper's interface its callers use: execute, nextset, fetch
    finally:
        pool.putconn(raw)


def _kept_cursor(raw: Connection, statement: str) -> Cursor:
    """The pooled connection's cursor for `statement`, made on its first use and kept with the connection: psycopg
    keeps a cursor's parameter adapters (its dumpers, looked up per type) only while the cursor runs the same
    statement again, so a connection has one per statement name rather than a new one per execution. Only the holder
    of the connection uses them; they go when the pool drops the connection."""
    kept: dict[str, Cursor] = raw.__dict__.setdefault("_gateway_cursors", {})
    cursor = kept.get(statement)
    if cursor is None or cursor.closed:
        cursor = kept[statement] = Cursor(raw)
    return cursor
