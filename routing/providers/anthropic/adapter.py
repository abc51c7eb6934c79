from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from byok.credentials import ProviderCredentials
from routing import jsonsafe
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.errors import UpstreamError, error_type_for_status, is_retryable, parse_retry_after
from routing.providers.anthropic import request as messages_request
from routing.providers.anthropic import response as messages_response
from routing.providers.anthropic import web_search
from routing.providers.base import ProviderAdapter, UpstreamRequest
from routing.providers.hosted import WEB_SEARCH
from routing.sse import SSEEvent

# The status each Anthropic error type normally comes with. https://docs.anthropic.com/en/api/errors
NATURAL_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicAdapter(ProviderAdapter):
    kind = "anthropic"
    docs_url = "https://docs.anthropic.com/en/api/messages"
    # stop_sequences, output_config, disable_parallel_tool_use, a tool's strict; no seed, no logprobs
    parameters = frozenset({"stop", "structured_outputs", "parallel_tool_calls_off", "strict_tools"})
    sampling = frozenset({"temperature", "top_p", "top_k"})  # no penalties, no verbosity

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        headers = {"x-api-key": credentials.api_key, "anthropic-version": messages_request.API_VERSION}
        return UpstreamRequest(url=f"{base_url}/messages", body=messages_request.build_body(request), headers=headers)

    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        return messages_response.parse(body)

    def stream_events(self, events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
        return messages_response.stream(events)

    def map_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        """Anthropic errors: {"type": "error", "error": {"type", "message"}}; 529 is overloaded.
        https://docs.anthropic.com/en/api/errors"""
        try:
            payload = jsonsafe.loads(body or b"{}")
        except ValueError:
            payload = {}
        error = payload.get("error") if isinstance(payload, dict) else None
        if not isinstance(error, dict) or error.get("type") not in messages_response.ERROR_TYPES:
            return super().map_error(status, body, headers)
        mapped = messages_response.stream_error(payload)
        error_type, retryable = mapped.error_type, is_retryable(status)
        if "prompt is too long" in mapped.message.lower():
            error_type, retryable = "context_length_exceeded", True
        elif NATURAL_STATUS.get(error["type"]) != status:
            error_type = error_type_for_status(status)  # the status is more specific than the body's type
        return UpstreamError(
            error_type=error_type,
            message=mapped.message,
            retryable=retryable,
            status=status,
            retry_after=parse_retry_after(headers),
            provider_code=mapped.provider_code,
        )

    # The tools Anthropic runs itself that this adapter passes on: web search (its web_search_20250305 tool).
    hosted_tools = frozenset({WEB_SEARCH})

    def hosted_tool_problem(self, tool: dict[str, Any]) -> str | None:
        """Why Anthropic cannot run a hosted tool as given (None: it can)."""
        return web_search.tool_problem(tool)
