"""The one place that turns every error under /api/v1 into the spec's Error body.

{"error": {"code": <HTTP status>, "message": "...", "metadata": {...}}, "user_id": null}
"""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response

logger = logging.getLogger(__name__)

MSG_INTERNAL = "Internal server error"
MSG_NOT_FOUND = "Not found"
MSG_BODY_TOO_LARGE = "Request body is too large (limit: {limit} bytes)"
MSG_MALFORMED_JSON = "Malformed JSON body: {detail}"
MSG_JSON_TOO_DEEP = "JSON body is nested too deeply: at most {limit} levels of arrays and objects"
MSG_MANAGEMENT_ONLY = "Only management keys can perform this operation"
MSG_INFERENCE_ONLY = "Management keys cannot be used for inference; use an inference API key"
MSG_MISSING_AUTH = "Missing Authentication header"
MSG_INVALID_KEY = "Invalid API key"


class GatewayError(Exception):
    """An error with an HTTP status and the spec's body; raise it from services."""

    status = 400

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        metadata: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        gateway_metadata: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.metadata = metadata or {}
        self.headers = headers or {}
        self.gateway_metadata = gateway_metadata


class JsonTooDeep(exceptions.ParseError, ValueError):
    """Nesting beyond the limit, found before any recursive parsing (gateway/parsers.py)."""


class PaymentRequired(GatewayError):
    status = 402


class NotFound(GatewayError):
    status = 404


MSG_DATABASE_BUSY = "The gateway is busy (no database connection was free in time); retry shortly"


def error_body(status: int, message: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return {"error": error, "user_id": None}


# Statuses an SDK retries by default (openai, anthropic: 408, 409, 429, 5xx) where a retry can help: they get a
# `Retry-After` (seconds) when the error did not set one, so the SDK waits at least that long, not its shortest
# backoff. 500 (a bug here) and 501 are left to the SDK's own rules.
RETRY_AFTER_STATUSES = frozenset({429, 502, 503, 524, 529})
DEFAULT_RETRY_AFTER = "1"
# Client errors a retry cannot fix: the official SDKs read `x-should-retry` before any status rule.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 429})


def retry_headers(status: int, headers: dict[str, str]) -> dict[str, str]:
    """The error's headers with the retry advice: `x-should-retry: false` on a 4xx other than 408, 409 and 429
    (and wherever the error set it itself, as for a model no provider has credentials for), `Retry-After` on
    RETRY_AFTER_STATUSES. Headers the error set (an upstream's Retry-After, the throttle's wait) are kept."""
    names = {name.lower() for name in headers}
    advice = dict(headers)
    if "x-should-retry" in names:
        return advice
    if 400 <= status < 500 and status not in RETRYABLE_CLIENT_STATUSES:
        advice["x-should-retry"] = "false"
    elif status in RETRY_AFTER_STATUSES and "retry-after" not in names:
        advice["Retry-After"] = DEFAULT_RETRY_AFTER
    return advice


def error_json_response(
    status: int, message: str, metadata: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> JsonResponse:
    response = JsonResponse(error_body(status, message, metadata), status=status)
    for name, value in retry_headers(status, headers or {}).items():
        response[name] = value
    return response


def _flatten_validation(detail: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Turn DRF's nested ValidationError detail into (field path, message) pairs."""
    if isinstance(detail, dict):
        pairs = []
        for key, value in detail.items():
            if isinstance(key, int):  # ListField / DictField child errors are keyed by position
                path = f"{prefix}[{key}]"
            elif key == "non_field_errors":
                path = prefix or "body"
            else:
                path = f"{prefix}.{key}" if prefix else key
            pairs.extend(_flatten_validation(value, str(path)))
        return pairs
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [(prefix or "body", str(item)) for item in detail]
        pairs = []
        for index, value in enumerate(detail):
            pairs.extend(_flatten_validation(value, f"{prefix}[{index}]"))
        return pairs
    return [(prefix or "body", str(detail))]


def _validation_response(exc: exceptions.ValidationError) -> tuple[str, dict[str, Any]]:
    pairs = _flatten_validation(exc.detail)
    message = "; ".join(f"{field}: {text}" for field, text in pairs) or "Invalid request"
    return message, {"fields": {field: text for field, text in pairs}}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception raised by an API view ends here."""
    headers: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    if isinstance(exc, GatewayError):
        status, message, metadata, headers = exc.status, exc.message, exc.metadata, exc.headers
    elif isinstance(exc, RequestDataTooBig):
        from django.conf import settings

        status, message = 413, MSG_BODY_TOO_LARGE.format(limit=settings.MAX_REQUEST_BODY_BYTES)
    elif isinstance(exc, JsonTooDeep):
        status, message = 400, str(exc.detail)
    elif isinstance(exc, exceptions.ParseError):
        status, message = 400, MSG_MALFORMED_JSON.format(detail=exc.detail)
    elif isinstance(exc, exceptions.ValidationError):
        status = 400
        message, metadata = _validation_response(exc)
    elif isinstance(exc, exceptions.APIException):
        status, message = exc.status_code, str(exc.detail)
        wait = getattr(exc, "wait", None)
        if wait is not None:
            headers["Retry-After"] = str(int(wait))
    elif isinstance(exc, Http404):
        status, message = 404, MSG_NOT_FOUND
    elif isinstance(exc, PermissionDenied):
        status, message = 403, str(exc) or "Forbidden"
    elif isinstance(exc, OperationalError):  # no database connection free in time (pool), or the database down
        logger.warning("database unavailable: %s", type(exc.__cause__ or exc).__name__)
        status, message, headers = 503, MSG_DATABASE_BUSY, {"Retry-After": "1"}
    else:
        view = context.get("view")
        logger.exception("Unhandled error in %s", type(view).__name__ if view else "view")
        status, message = 500, MSG_INTERNAL
    body = error_body(status, message, metadata)
    gateway_metadata = getattr(exc, "gateway_metadata", None)
    if gateway_metadata is not None:
        body["gateway_metadata"] = gateway_metadata
    response = Response(body, status=status)
    for name, value in retry_headers(status, headers).items():
        response[name] = value
    return response


def is_api_path(path: str) -> bool:
    return path.startswith("/api/")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request.path_info):
        return error_json_response(404, MSG_NOT_FOUND)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path_info):
        return error_json_response(500, MSG_INTERNAL)
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path_info):
        return error_json_response(400, "Bad request")
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path_info):
        return error_json_response(403, "Forbidden")
    from django.views.defaults import permission_denied

    return permission_denied(request, exception)
