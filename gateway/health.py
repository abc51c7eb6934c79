import logging

from django.db import connection
from django.http import JsonResponse

from gateway.cache import cache_status

logger = logging.getLogger(__name__)


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Readiness: the database is reachable (503 otherwise). The shared cache is an optimisation: when Redis
    is unavailable this process serves it from local memory, so `cache: degraded` still answers 200.
    `details.cache` has this process's cache counters (errors, outages, operations served locally)."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:
        logger.exception("readiness: database unreachable")
        checks["database"] = "unavailable"
    cache = cache_status(probe=True)
    checks["cache"] = cache["state"]
    ready = checks["database"] == "ok"
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks, "details": {"cache": cache}},
        status=200 if ready else 503,
    )
