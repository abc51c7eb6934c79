"""The explicit registry of adapters, by the catalog's `Provider.adapter` value."""

from routing.providers.anthropic.adapter import AnthropicAdapter
from routing.providers.azure.adapter import AzureAdapter
from routing.providers.base import ProviderAdapter
from routing.providers.bedrock.adapter import BedrockAdapter
from routing.providers.openai_chat.adapter import OpenAIChatAdapter
from routing.providers.openai_responses.adapter import OpenAIResponsesAdapter
from routing.providers.vertex.adapter import VertexAnthropicAdapter

ADAPTERS: dict[str, ProviderAdapter] = {
    adapter.kind: adapter
    for adapter in (
        OpenAIChatAdapter(),
        OpenAIResponsesAdapter(),
        AnthropicAdapter(),
        AzureAdapter(),
        VertexAnthropicAdapter(),
        BedrockAdapter(),
    )
}


def adapter_for(kind: str) -> ProviderAdapter:
    return ADAPTERS[kind]
