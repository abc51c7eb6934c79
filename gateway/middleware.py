"""API requests: refuse the bodies gateway/request_body.py refused, and hand database connections back early.

The WSGI application (gateway/wsgi.py) reads API bodies whole, size-checked and within a total deadline,
before Django builds the request; this middleware, which runs before authentication, answers its refusals (413,
408, 411, 415, 501, 400) in the API's error body. Under a server that does not go through that application
(Django's test client), it makes the checks that need only the head (sizes, codings), and the view reads
the body itself.

The view then parses the buffered body. No database connection is open while waiting: Django opens one
lazily, and on PostgreSQL the pool gets each connection back at the end of the request that used it. That
end comes only after the server has written the response, so once the view has answered, this middleware
hands back the connections that would be closed at the end anyway (CONN_MAX_AGE 0, as with the pool): a
client that reads its response slowly does not hold one either. (Streams release theirs themselves.)
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from gateway.errors import error_json_response, is_api_path
from gateway.request_body import BUFFERED, REFUSAL, Refused, planned_read


class ApiBodyLimitMiddleware:
    """API bodies: 413 over the size limit, 408 past the deadline, read whole before authentication."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if is_api_path(request.path_info):
            refusal = body_refusal(request.META)
            if refusal is not None:
                return error_json_response(refusal.status, refusal.message)
            response = self.get_response(request)
            release_connections()
            return response
        return self.get_response(request)


def release_connections() -> None:
    """Close (on PostgreSQL: return to the pool) the connections that the end of the request would close."""
    for conn in connections.all(initialized_only=True):
        if (
            conn.connection is not None
            and conn.vendor != "sqlite"
            and not conn.in_atomic_block
            and conn.settings_dict.get("CONN_MAX_AGE") == 0
        ):
            conn.close()


def body_refusal(meta: dict[str, Any]) -> Refused | None:
    """The refusal gateway/wsgi.py left for this request; without it (another server), the head's checks."""
    refusal = meta.get(REFUSAL)
    if refusal is None and BUFFERED not in meta:
        try:
            planned_read(meta, settings.MAX_REQUEST_BODY_BYTES)
        except Refused as exc:
            refusal = exc
    return refusal
