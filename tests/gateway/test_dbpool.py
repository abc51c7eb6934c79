"""The PostgreSQL pool checks a connection before it hands it out (Django's CONN_HEALTH_CHECKS gives it psycopg_pool's
check): one that died while idle (a database restart, an idle-session timeout) is replaced, not given to a request."""

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo


def _pooled() -> bool:
    # From the settings: `connection.pool` would create the pool, at collection time on the main database's name
    return connection.vendor == "postgresql" and bool(settings.DATABASES["default"].get("OPTIONS", {}).get("pool"))


@pytest.mark.skipif(not _pooled(), reason="PostgreSQL's connection pool")
@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_that_died_while_idle_is_not_handed_out():
    # Given a pool whose one idle connection was ended by the server (the others held meanwhile)
    connection.close()
    pool = connection.pool
    idle = [pool.getconn() for _ in range(max(1, pool.get_stats()["pool_available"]))]
    spare, held = idle[0], idle[1:]
    dead = spare.info.backend_pid
    pool.putconn(spare)
    params = connection.get_connection_params()
    wanted = {key: params[key] for key in ("dbname", "host", "port", "user", "password") if params.get(key)}
    try:
        with psycopg.connect(make_conninfo(**wanted), autocommit=True) as other:
            assert other.execute("SELECT pg_terminate_backend(%s, 5000)", [dead]).fetchone() == (True,)
        # When a statement runs, then it runs on a live connection (the pool found the dead one and replaced it)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != dead
    finally:
        connection.close()
        for conn in held:
            pool.putconn(conn)
