import logging

from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse

logger = logging.getLogger(__name__)


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Readiness: the database and the cache are reachable."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:
        logger.exception("readiness: database unreachable")
        checks["database"] = "unavailable"
    try:
        cache.set("readyz", "1", 5)
        checks["cache"] = "ok" if cache.get("readyz") == "1" else "unavailable"
    except Exception:
        logger.exception("readiness: cache unreachable")
        checks["cache"] = "unavailable"
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
