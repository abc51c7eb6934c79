from collections.abc import Iterable, Iterator
from typing import Any

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.providers import embeddings
from routing.providers.base import (
    GATED_PARAMETERS,
    SAMPLING_PARAMETERS,
    WIRE_PARAMETERS,
    ProviderAdapter,
    UpstreamRequest,
    bearer,
)
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.providers.hosted import WEB_SEARCH
from routing.providers.openai_chat import request as chat_request
from routing.providers.openai_chat import response as chat_response
from routing.providers.openai_chat import web_search
from routing.sse import SSEEvent


class OpenAIChatAdapter(ProviderAdapter):
    """OpenAI Chat Completions, and every OpenAI-compatible provider (a catalog row with this adapter)."""

    kind = "openai_chat"
    docs_url = "https://platform.openai.com/docs/api-reference/chat"
    supports_embeddings = True
    parameters = GATED_PARAMETERS | WIRE_PARAMETERS  # stop, seed, logprobs, top_logprobs, a json_schema
    sampling = SAMPLING_PARAMETERS  # top_k for the compatible servers that take it

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        return UpstreamRequest(
            url=f"{base_url}/chat/completions", body=chat_request.build_body(request), headers=bearer(credentials)
        )

    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        return chat_response.parse(body)

    def stream_events(self, events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
        return chat_response.stream(events)

    def build_embeddings_request(
        self, request: EmbeddingRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        return UpstreamRequest(
            url=f"{base_url}/embeddings", body=embeddings.openai_body(request), headers=bearer(credentials)
        )

    def parse_embeddings(self, body: dict[str, Any], *, expected: int) -> EmbeddingResponse:
        return embeddings.openai_parse(body, expected=expected)

    # The tools a provider runs itself that this adapter passes on: web search (OpenAI's search models).
    hosted_tools = frozenset({WEB_SEARCH})

    def hosted_tool_problem(self, tool: dict[str, Any]) -> str | None:
        """Why a Chat Completions provider cannot run a hosted tool as given (None: it can)."""
        return web_search.tool_problem(tool)
