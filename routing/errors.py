"""Typed upstream errors: what went wrong, whether another endpoint may be tried, and when."""

from dataclasses import dataclass

# `error_type` values are the API's ApiErrorType vocabulary (the SDKs know no others).


@dataclass(eq=False)  # not frozen: Python sets __traceback__ & co. on exceptions as they travel
class UpstreamError(Exception):
    """An upstream attempt that failed. `message` is safe to show; it never holds credentials."""

    error_type: str
    message: str
    retryable: bool
    status: int | None = None  # the upstream HTTP status, None for transport failures
    retry_after: float | None = None
    provider_code: str | None = None

    def __str__(self) -> str:
        return f"{self.error_type} ({self.status}): {self.message}"


def error_type_for_status(status: int) -> str:
    if status == 400:
        return "invalid_request"
    if status == 401:
        return "authentication"
    if status == 402:
        return "payment_required"
    if status == 403:
        return "permission_denied"
    if status == 404:
        return "not_found"
    if status in (408, 504, 524):
        return "timeout"
    if status == 413:
        return "payload_too_large"
    if status == 422:
        return "unprocessable"
    if status == 429:
        return "rate_limit_exceeded"
    if status in (503, 529):
        return "provider_overloaded"
    return "provider_unavailable" if status >= 500 else "invalid_request"


# Statuses after which another endpoint may succeed: provider-side failures, rate limits, and
# credential problems (another endpoint or key has other credentials). Bad input (400, 413, 422)
# fails the same way everywhere, so it is returned.
RETRYABLE_STATUSES = frozenset({401, 402, 403, 404, 408, 409, 425, 429}) | frozenset(range(500, 600))


def is_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES


def parse_retry_after(headers) -> float | None:
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
