"""Anthropic models on Google Vertex AI: the Anthropic Messages wire format on Vertex's `rawPredict` /
`streamRawPredict`, with `anthropic_version` in the body instead of `model`, and an OAuth bearer token.
https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude"""

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest
from routing.providers.anthropic.adapter import AnthropicAdapter
from routing.providers.base import UpstreamRequest
from routing.providers.vertex.auth import vertex_credentials

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
GOOGLE_HOST = "aiplatform.googleapis.com"


def vertex_base(base_url: str, region: str) -> str:
    """The regional API root; a non-Google base URL (a proxy, a test server) is used as is."""
    if GOOGLE_HOST not in base_url:
        return base_url
    return f"https://{GOOGLE_HOST}/v1" if region == "global" else f"https://{region}-{GOOGLE_HOST}/v1"


class VertexAnthropicAdapter(AnthropicAdapter):
    kind = "vertex"
    docs_url = "https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude"

    def prepare_credentials(self, credentials: ProviderCredentials) -> ProviderCredentials:
        return vertex_credentials(credentials)  # a service account's token exchange (cached)

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        anthropic = super().build_request(request, base_url=base_url, credentials=credentials)
        body = {key: value for key, value in anthropic.body.items() if key != "model"}
        body["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        extra = credentials.extra if isinstance(credentials.extra, dict) else {}
        region = extra.get("region") or "global"
        method = "streamRawPredict" if request.stream else "rawPredict"
        url = (
            f"{vertex_base(base_url, region)}/projects/{extra.get('project_id', '')}/locations/{region}"
            f"/publishers/anthropic/models/{request.model}:{method}"
        )
        return UpstreamRequest(url=url, body=body, headers={"Authorization": f"Bearer {credentials.api_key}"})
