from collections.abc import Iterable, Iterator
from typing import Any

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.providers import embeddings
from routing.providers.base import ProviderAdapter, UpstreamRequest, bearer
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.providers.hosted import CAPABILITIES
from routing.providers.openai_responses import hosted as responses_hosted
from routing.providers.openai_responses import request as responses_request
from routing.providers.openai_responses import response as responses_response
from routing.sse import SSEEvent


class OpenAIResponsesAdapter(ProviderAdapter):
    kind = "openai_responses"
    docs_url = "https://platform.openai.com/docs/api-reference/responses"
    supports_embeddings = True  # OpenAI serves /embeddings beside /responses
    # no stop sequences or seed
    parameters = frozenset(
        {
            "logprobs",
            "top_logprobs",
            "structured_outputs",
            "reasoning_with_forced_tool_choice",
            "parallel_tool_calls_off",
            "strict_tools",
        }
    )
    sampling = frozenset({"temperature", "top_p", "verbosity"})  # no top_k, no penalties

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        return UpstreamRequest(
            url=f"{base_url}/responses", body=responses_request.build_body(request), headers=bearer(credentials)
        )

    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        return responses_response.parse(body)

    def stream_events(self, events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
        return responses_response.stream(events)

    def build_embeddings_request(
        self, request: EmbeddingRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        return UpstreamRequest(
            url=f"{base_url}/embeddings", body=embeddings.openai_body(request), headers=bearer(credentials)
        )

    def parse_embeddings(self, body: dict[str, Any], *, expected: int) -> EmbeddingResponse:
        return embeddings.openai_parse(body, expected=expected)

    # The tools OpenAI runs itself: every hosted tool, sent as the caller gave it (the Responses shape is ours).
    hosted_tools = frozenset(CAPABILITIES)

    def hosted_tool_problem(self, tool: dict[str, Any]) -> str | None:
        """Why OpenAI cannot run a hosted tool as given (None: it can)."""
        return responses_hosted.tool_problem(tool)
