"""Azure OpenAI: the Chat Completions wire format behind Azure's URLs and `api-key` header.
https://learn.microsoft.com/azure/ai-foundry/openai/reference

Where to send a request comes from the credential's Azure config (chosen per model by byok.selectors):
a per-deployment config's full `endpoint_url` (the deployment is in the URL), or a catalog config's
`resource_name` on the v1 API (`/openai/v1/chat/completions`, the deployment as `model`); without a
config (the operator's own key), the provider's base URL."""

from collections.abc import Iterable, Iterator
from typing import Any

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.providers.base import (
    GATED_PARAMETERS,
    SAMPLING_PARAMETERS,
    WIRE_PARAMETERS,
    ProviderAdapter,
    UpstreamRequest,
)
from routing.providers.openai_chat import request as chat_request
from routing.providers.openai_chat import response as chat_response
from routing.sse import SSEEvent

HOSTS = {"openai": "openai.azure.com", "ai_foundry": "services.ai.azure.com"}


def azure_target(config: dict[str, Any] | None, base_url: str, model: str) -> tuple[str, str, bool]:
    """(url, model for the body, whether the URL came from the customer)."""
    if config and config.get("endpoint_url"):
        return config["endpoint_url"], config.get("model_id") or model, True
    if config and config.get("resource_name"):
        host = HOSTS[config.get("resource_type") or "openai"]
        return f"https://{config['resource_name']}.{host}/openai/v1/chat/completions", model, True
    return f"{base_url}/chat/completions", model, False


class AzureAdapter(ProviderAdapter):
    kind = "azure"
    docs_url = "https://learn.microsoft.com/azure/ai-foundry/openai/reference"
    parameters = GATED_PARAMETERS | WIRE_PARAMETERS  # the Chat Completions body: stop, seed, logprobs, response_format
    sampling = SAMPLING_PARAMETERS  # the Chat Completions body

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        config = credentials.extra.get("azure_config") if isinstance(credentials.extra, dict) else None
        url, model, customer_url = azure_target(config, base_url, request.model)
        body = chat_request.build_body(request)
        body["model"] = model
        return UpstreamRequest(url=url, body=body, headers={"api-key": credentials.api_key}, customer_url=customer_url)

    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        return chat_response.parse(body)

    def stream_events(self, events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
        return chat_response.stream(events)
