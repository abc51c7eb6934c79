"""The WSGI application, and `warm_up()`, which gunicorn runs in each worker before it accepts a request
(gateway/gunicorn_conf.py: post_worker_init), so that a burst right after a (re)start does not pay for what
the first requests would otherwise do lazily, all at once: importing the URLconf and through it every view,
serializer and adapter, DRF's configured classes, opening the database pool and the Redis client, and
loading the catalog snapshot."""

import logging
import os
import time

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings.base")
application = get_wsgi_application()

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


def _warm_clients() -> dict[str, str]:
    """Open this process's database pool and Redis client, and load the catalog snapshot (one query). An
    unavailable database is reported, not raised: the worker still starts, and /readyz says so."""
    from django.db import DatabaseError, connections

    from gateway.cache import cache_status
    from routing.snapshot import current_snapshot

    state = {}
    try:
        current_snapshot()
        state["database"] = "ok (catalog loaded)"
    except DatabaseError as exc:
        state["database"] = f"error ({type(exc).__name__})"
    finally:
        connections.close_all()  # this thread serves no requests: its connection goes back to the pool
    cache = cache_status(probe=True)
    state["cache"] = f"{cache['backend']} {cache['state']}"
    return state


def warm_up() -> str:
    """Warm this process; a one-line summary for the log."""
    started = time.perf_counter()
    view = _warm_imports()
    clients = _warm_clients()
    took = (time.perf_counter() - started) * 1000
    details = ", ".join(f"{name} {value}" for name, value in clients.items())
    return f"warm in {took:.0f} ms: URLconf ready ({WARM_PATH} -> {view}), {details}"
