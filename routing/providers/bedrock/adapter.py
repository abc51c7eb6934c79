from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from byok.credentials import ProviderCredentials
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.errors import UpstreamError, error_type_for_status, is_retryable, parse_retry_after
from routing.providers.base import ProviderAdapter, UpstreamRequest, error_details
from routing.providers.bedrock import request as converse_request
from routing.providers.bedrock import response as converse_response
from routing.providers.bedrock import sigv4
from routing.providers.bedrock.eventstream import StreamMessage, decode_event_stream

AWS_HOST = "amazonaws.com"


def bedrock_base(base_url: str, region: str | None) -> str:
    """The regional runtime endpoint for access-key credentials; other base URLs (API keys are tied to the
    provider row's region; proxies; the stand-in) are used as is."""
    if region and AWS_HOST in base_url:
        return f"https://bedrock-runtime.{region}.{AWS_HOST}"
    return base_url


class BedrockAdapter(ProviderAdapter):
    """Bedrock's Converse API: a Bedrock API key as a bearer token, or an access key pair signed with SigV4."""

    kind = "bedrock"
    docs_url = "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html"
    parameters = frozenset({"stop"})  # inferenceConfig.stopSequences; Converse has no seed, logprobs or JSON schema
    sampling = frozenset({"temperature", "top_p", "top_k"})  # inferenceConfig; top_k as a model field

    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        extra = credentials.extra if isinstance(credentials.extra, dict) else {}
        method = "converse-stream" if request.stream else "converse"
        url = f"{bedrock_base(base_url, extra.get('region'))}/model/{quote(request.model, safe='')}/{method}"
        body = converse_request.build_body(request)
        content = converse_request.encode(body)
        headers = {"Content-Type": "application/json"}
        if extra.get("accessKeyId"):
            headers.update(
                sigv4.sign(
                    method="POST",
                    url=url,
                    headers=headers,
                    body=content,
                    access_key=extra["accessKeyId"],
                    secret_key=extra["secretAccessKey"],
                    region=extra["region"],
                    service="bedrock",
                    now=datetime.now(UTC),
                )
            )
        else:
            headers["Authorization"] = f"Bearer {credentials.api_key}"
        return UpstreamRequest(url=url, body=body, headers=headers, content=content)

    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        return converse_response.parse(body)

    def decode(self, chunks: Iterable[bytes]) -> Iterator[StreamMessage]:
        return decode_event_stream(chunks)

    # Its decode yields event-stream messages, not server-sent events: the frames this reads.
    def stream_events(self, events: Iterable[StreamMessage]) -> Iterator[StreamEvent]:  # type: ignore[override]
        return converse_response.stream(events)

    def map_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        """Bedrock errors: `{"message"}` with the exception in the `x-amzn-ErrorType` header."""
        message, _ = error_details(body)
        error_header = next((v for k, v in headers.items() if k.lower() == "x-amzn-errortype"), "")
        code = error_header.split(":", 1)[0] or None
        error_type: str = error_type_for_status(status)
        retryable = is_retryable(status)
        if status == 424:  # ModelErrorException: the model failed; another endpoint may not
            error_type, retryable = "provider_unavailable", True
        if "too long" in message.lower() or "input is too long" in message.lower():
            error_type, retryable = "context_length_exceeded", True
        return UpstreamError(
            error_type=error_type,
            message=message,
            retryable=retryable,
            status=status,
            retry_after=parse_retry_after(headers),
            provider_code=code,
        )
