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

from django.db import connection
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


def prepared_cursor() -> CursorWrapper:
    """A cursor of the default connection whose statements PostgreSQL parses and plans once per connection, then
    runs from the prepared plan: for the hot path's fixed statements (a request's hold and its settlement). The
    parameters are bound on the server (a statement must be one statement). Django's cursors bind them on the
    client and send every statement as new text; they stay the default for the ORM. Counted and logged as any
    cursor's statements. The settings turn preparing on (OPTIONS prepare_threshold 0, DB_PREPARED_STATEMENTS);
    without it (SQLite, or PostgreSQL behind a pooler that cannot keep prepared statements) this is an ordinary
    cursor."""
    if connection.vendor != "postgresql" or connection.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        return connection.cursor()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        # _prepare_cursor: what Django's own cursor() does with the cursor it creates (wrapped, counted, logged)
        return connection._prepare_cursor(Cursor(connection.connection))  # type: ignore[attr-defined]
