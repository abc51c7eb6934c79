"""The final error of a request whose every attempt failed, as the spec's statuses."""

from gateway.errors import GatewayError
from routing.errors import UpstreamError

MSG_PROVIDER_ERROR = "Provider returned error"
MSG_TIMEOUT = "Request timed out. Please try again later."
PASSTHROUGH = {400, 413, 422, 429, 503, 529}


def gateway_status(error: UpstreamError) -> int:
    if error.error_type == "timeout":
        return 408 if error.status == 408 else 524
    if error.error_type == "context_length_exceeded":
        return 400
    if error.status in PASSTHROUGH:
        return error.status
    return 502  # provider-side failures, and provider credential problems (not the caller's key)


def final_error(error: UpstreamError, *, attempts: list, gateway_metadata: dict | None) -> GatewayError:
    status = gateway_status(error)
    if status == 524 or status == 408:
        message = MSG_TIMEOUT
    elif status >= 500 and status != 503:
        message = MSG_PROVIDER_ERROR
    else:
        message = error.message
    metadata = {
        "error_type": error.error_type,
        "provider_name": attempts[-1].provider_name if attempts else None,
        "previous_errors": [
            {"provider": a.provider_name, "status": a.status, "code": a.error_type} for a in attempts[:-1]
        ],
    }
    if error.provider_code and status < 500:
        metadata["provider_code"] = error.provider_code
    headers = {}
    if error.retry_after is not None and status in (429, 503, 529):
        headers["Retry-After"] = str(max(1, round(error.retry_after)))
        metadata["retry_after_seconds"] = error.retry_after
    return GatewayError(message, status=status, metadata=metadata, headers=headers, gateway_metadata=gateway_metadata)
