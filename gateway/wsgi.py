"""The WSGI application, and `warm_up()`, which gunicorn runs in each worker before it accepts a request
(gateway/gunicorn_conf.py: post_worker_init), so that a burst right after a (re)start does not pay for what
the first requests would otherwise do lazily, all at once: importing the URLconf and through it every view,
serializer and adapter, DRF's configured classes, opening the database pool and the Redis client, and
loading the catalog snapshot.

The application reads API request bodies before Django builds the request (gateway/request_body.py)."""

import logging
import os
import time

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings.base")
django_application = get_wsgi_application()

from django.conf import settings  # noqa: E402 (configured by get_wsgi_application)

from gateway.errors import is_api_path  # noqa: E402
from gateway.request_body import BUFFERED, REFUSAL, Refused, buffer_body  # noqa: E402


def application(environ, start_response):
    """Django's WSGI application, given API bodies already read (or their refusal, which Django's middleware
    answers: gateway/middleware.py)."""
    if is_api_path(environ.get("PATH_INFO", "")):
        try:
            buffer_body(environ, limit=settings.MAX_REQUEST_BODY_BYTES, seconds=settings.REQUEST_BODY_TIMEOUT_SECONDS)
        except Refused as refusal:
            environ[REFUSAL] = refusal
        else:
            environ[BUFFERED] = True
    return django_application(environ, start_response)


logger = logging.getLogger(__name__)
WARM_PATH = "/api/v1/responses"


def _warm_imports() -> str:
    """Import what serving a request imports (no I/O); the name of the view serving WARM_PATH."""
    from django.conf import settings
    from django.urls import get_resolver, resolve
    from django.utils.module_loading import import_string
    from rest_framework.settings import IMPORT_STRINGS, api_settings

    get_resolver().url_patterns  # noqa: B018 (imports the URLconf and every view module)
    match = resolve(WARM_PATH)
    for name in IMPORT_STRINGS:  # DRF imports its configured classes on first use
        getattr(api_settings, name)
    for dotted in (settings.MESSAGE_STORAGE, settings.SESSION_SERIALIZER):  # the middleware's, per request
        import_string(dotted)
    return getattr(match.func, "view_class", match.func).__name__


def _open_database_connections(count: int | None) -> int:
    """Open `count` connections of this process's database pool (None: as many as it may hold), keep them open
    while idle too, prepare a request's statements on each and hand them back, so that the first burst neither
    waits on the pool opening them one by one nor pays for new server processes planning its statements. Each
    worker holds them: mind max_connections."""
    from django.db import connection

    pool = getattr(connection, "pool", None)  # PostgreSQL with a pool configured; None otherwise
    if pool is None:
        return 0
    from gateway.billing.statements import statements_prepare

    wanted = pool.max_size if count is None else min(count, pool.max_size)
    connection.close()  # this thread's connection goes back first: a pool of 2 must not wait on itself
    missing = wanted - pool.get_stats()["pool_size"]
    if missing > 0:  # the pool opens them now, and keeps them (resize adds the rise in min_size to what it has)
        pool.resize(min_size=pool.min_size + missing, max_size=pool.max_size)
    held = []
    try:
        for _ in range(wanted):
            held.append(pool.getconn())
        for conn in held:  # a new server process plans them, and loads its catalog entries, now
            statements_prepare(conn)
    finally:
        for conn in held:
            pool.putconn(conn)
    return len(held)


def _open_redis_connections(count: int) -> int:
    """The same for the Redis client's pool (Redis has no tight connection limit), when Redis is in use and up."""
    from django.core.cache import caches

    from gateway.cache import UNAVAILABLE, ResilientRedisCache

    backend = caches["default"]
    if not isinstance(backend, ResilientRedisCache) or backend.breaker.degraded:
        return 0
    pool = backend.redis_client().connection_pool
    held = []
    try:
        for _ in range(min(count, pool.max_connections)):  # one more would be an error (an "outage")
            held.append(pool.get_connection())
    except UNAVAILABLE as exc:
        backend.breaker.failed(exc)
    for conn in held:
        pool.release(conn)
    return len(held)


def _warm_clients(*, database_connections: int | None, redis_connections: int) -> dict[str, str]:
    """Open this process's database pool and Redis client, and load the catalog snapshot (one query). An
    unavailable database is reported, not raised: the worker still starts, and /readyz says so."""
    import psycopg
    from django.db import DatabaseError, connections

    from gateway.cache import cache_status
    from routing.snapshot import current_snapshot

    state = {}
    try:
        current_snapshot()
        opened = _open_database_connections(database_connections)
        state["database"] = f"ok (catalog loaded), {opened} connections open"
    except (DatabaseError, psycopg.Error) as exc:  # the pool's own (a timeout) and a prepared statement's too
        state["database"] = f"error ({type(exc).__name__})"
    finally:
        connections.close_all()  # this thread serves no requests: its connection goes back to the pool
    cache = cache_status(probe=True)
    state["cache"] = (
        f"{cache['backend']} {cache['state']}, {_open_redis_connections(redis_connections)} connections open"
    )
    return state


def warm_up(*, database_connections: int | None = 0, redis_connections: int = 0) -> str:
    """Warm this process, opening that many connections to the database (None: its whole pool) and to Redis
    ahead of the first burst; a one-line summary for the log."""
    started = time.perf_counter()
    view = _warm_imports()
    clients = _warm_clients(database_connections=database_connections, redis_connections=redis_connections)
    took = (time.perf_counter() - started) * 1000
    details = ", ".join(f"{name} {value}" for name, value in clients.items())
    return f"warm in {took:.0f} ms: URLconf ready ({WARM_PATH} -> {view}), {details}"
