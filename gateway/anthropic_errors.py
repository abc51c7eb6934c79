"""The Anthropic Messages door answers every error in Anthropic's shape (https://docs.anthropic.com/en/api/errors),
wherever it is made: its view (responses_api.messages.apis), a middleware for those made before it
(responses_api.messages.errors), and the gunicorn worker for the requests gunicorn itself refuses
(gateway.gunicorn_worker). Anthropic's SDK raises by status and reads `error.type`. No Django here: the gunicorn
master imports the worker module."""

from typing import Any

ANTHROPIC_DOOR = "/api/v1/messages"
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    524: "timeout_error",
    529: "overloaded_error",
}


def is_anthropic_door(path: str) -> bool:
    return path == ANTHROPIC_DOOR or path.startswith(ANTHROPIC_DOOR + "/")


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's type for the status; any other client error is an invalid request (api_error means ours)."""
    kind = ANTHROPIC_ERROR_TYPES.get(status) or ("invalid_request_error" if 400 <= status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
