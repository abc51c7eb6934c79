import logging
import threading

from django.conf import settings
from django.db import connection, connections
from django.http import HttpRequest, JsonResponse

from gateway.cache import cache_status

logger = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers within READYZ_DATABASE_TIMEOUT (503 otherwise). The shared cache is an
    optimisation: when Redis is unavailable this process serves it from local memory, so `cache: degraded` still
    answers 200. `details.cache` has this process's cache counters (errors, outages, operations served locally)."""
    checks = {"database": DATABASE_PROBE.check(timeout=settings.READYZ_DATABASE_TIMEOUT)}
    cache = cache_status(probe=True)
    checks["cache"] = cache["state"]
    ready = checks["database"] == "ok"
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks, "details": {"cache": cache}},
        status=200 if ready else 503,
    )


class DatabaseProbe:
    """`SELECT 1` in a thread of its own (a greenlet under gevent), waited for at most `timeout`: a database that
    stopped answering (frozen: connections open, nothing answered) makes /readyz say so in `timeout` rather than
    when a statement or connection deadline fires. One check at a time per process: probes arriving while one runs
    wait for that one, so a frozen database holds one thread (and one connection) here, not one per probe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._done.set()
        self._state = "unavailable"

    def check(self, *, timeout: float) -> str:
        with self._lock:
            if self._done.is_set():  # none running: start one (a finished check's answer is not reused)
                done = self._done = threading.Event()
                threading.Thread(target=self._run, args=(done,), name="readyz-db", daemon=True).start()
            done = self._done
        if not done.wait(timeout):
            logger.warning("readiness: the database did not answer within %s s", timeout)
            return "unavailable"
        return self._state

    def _run(self, done: threading.Event) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            self._state = "ok"
        except Exception:
            logger.exception("readiness: database unreachable")
            self._state = "unavailable"
        finally:
            connections.close_all()  # this thread's (a pooled one goes back)
            done.set()


DATABASE_PROBE = DatabaseProbe()
