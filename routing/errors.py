"""Typed upstream errors: what went wrong, whether another endpoint may be tried, and when."""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class ErrorType(StrEnum):
    """`error_type` values: the API's ApiErrorType vocabulary (the SDKs know no others). A StrEnum, so each
    member is its string on the wire, in JSON and in the database."""

    INVALID_REQUEST = "invalid_request"
    AUTHENTICATION = "authentication"
    PAYMENT_REQUIRED = "payment_required"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    TIMEOUT = "timeout"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNPROCESSABLE = "unprocessable"
    RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"
    PROVIDER_OVERLOADED = "provider_overloaded"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    CONTENT_POLICY_VIOLATION = "content_policy_violation"
    SERVER = "server"


# The error_type of "no provider of the model has credentials here" (routing.selection): a 404 HTTP error body's
# `error.metadata.error_type` only, never a response object's `error_type` (which the SDKs read as ApiErrorType), so
# it is not an ErrorType member. Not retryable: only the operator (a credential) or the caller (a BYOK key) fix it.
PROVIDER_NOT_CONFIGURED = "provider_not_configured"


@dataclass(eq=False)  # not frozen: Python sets __traceback__ & co. on exceptions as they travel
class UpstreamError(Exception):
    """An upstream attempt that failed. `message` is safe to show; it never holds credentials."""

    error_type: str  # an ErrorType (a StrEnum, so plain strings from adapters compare equal)
    message: str
    retryable: bool
    status: int | None = None  # the upstream HTTP status, None for transport failures
    retry_after: float | None = None
    provider_code: str | None = None

    def __str__(self) -> str:
        return f"{self.error_type} ({self.status}): {self.message}"


STATUS_ERROR_TYPES: dict[int, ErrorType] = {
    400: ErrorType.INVALID_REQUEST,
    401: ErrorType.AUTHENTICATION,
    402: ErrorType.PAYMENT_REQUIRED,
    403: ErrorType.PERMISSION_DENIED,
    404: ErrorType.NOT_FOUND,
    408: ErrorType.TIMEOUT,
    504: ErrorType.TIMEOUT,
    524: ErrorType.TIMEOUT,
    413: ErrorType.PAYLOAD_TOO_LARGE,
    422: ErrorType.UNPROCESSABLE,
    429: ErrorType.RATE_LIMIT_EXCEEDED,
    503: ErrorType.PROVIDER_OVERLOADED,
    529: ErrorType.PROVIDER_OVERLOADED,
}


def error_type_for_status(status: int) -> ErrorType:
    known = STATUS_ERROR_TYPES.get(status)
    if known is not None:
        return known
    return ErrorType.PROVIDER_UNAVAILABLE if status >= 500 else ErrorType.INVALID_REQUEST


# Statuses after which another endpoint may succeed: provider-side failures, rate limits, and
# credential problems (another endpoint or key has other credentials). Bad input (400, 413, 422)
# fails the same way everywhere, so it is returned.
RETRYABLE_STATUSES = frozenset({401, 402, 403, 404, 408, 409, 425, 429}) | frozenset(range(500, 600))


def is_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after` (seconds form) or `retry-after-ms`; None when absent or unparseable."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000, 0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(float(value), 0)
        except ValueError:
            return None
    return None
