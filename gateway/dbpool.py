"""The check the PostgreSQL pool runs on a connection it hands out.

psycopg_pool's own check (Django's CONN_HEALTH_CHECKS) costs a round trip every time a connection leaves the
pool, and a request takes one twice (it hands its connection back during the upstream call). This one pings a
connection at most every CHECK_EVERY_SECONDS: a connection that died since (a database restart) fails the
one request that drew it, and the pool replaces it. Django builds the pool itself and passes its own `check`,
so the settings turn Django's off and `pool_check_install` puts this one on the pool when the first
connection is made."""

import math
import time

from django.db.backends.signals import connection_created
from django.dispatch import receiver
from psycopg import Connection
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
