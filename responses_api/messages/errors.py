"""Every error on the Anthropic Messages door in Anthropic's shape, wherever it was made.

The view renders its own errors so (MessageCreateApi.handle_exception), but some are made before it runs: the
body size, deadline and coding refusals of gateway.middleware (which runs before routing, so it does not know
the door), Django's 404/500 handlers (a path under the door such as /messages/count_tokens, which Anthropic
clients call). Their bodies are the gateway's envelope; the Anthropic SDK then finds no `error.type`. This
middleware, outside all of those, turns any error response on the door that is not yet in Anthropic's shape
into it, keeping the status, the message and the headers (Retry-After, X-Generation-Id)."""

import json
from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse

from gateway.anthropic_errors import anthropic_error_body, is_anthropic_door

MAX_ERROR_BODY = 64 * 1024  # an error body larger than this is not parsed for its message (ours are small)


def anthropic_error(body: object, status: int) -> dict | None:
    """The Anthropic error body for a response body, or None when it is already one."""
    if isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = _phrase(status)
    anthropic = anthropic_error_body(status, message)
    if isinstance(body, dict) and "gateway_metadata" in body:
        anthropic["gateway_metadata"] = body["gateway_metadata"]
    return anthropic


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class AnthropicErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or response.streaming or not is_anthropic_door(request.path_info):
            return response
        body: object = None
        if response.get("Content-Type", "").startswith("application/json") and len(response.content) <= MAX_ERROR_BODY:
            try:
                body = json.loads(response.content)
            except ValueError:
                body = None
        anthropic = anthropic_error(body, response.status_code)
        if anthropic is None:
            return response
        response.content = json.dumps(anthropic).encode()
        response["Content-Type"] = "application/json"
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))
        return response
