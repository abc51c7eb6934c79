"""The adapter interface: each upstream wire format implements these four pure operations."""

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from byok.credentials import ProviderCredentials
from routing import jsonsafe
from routing.canonical import CanonicalRequest, CanonicalResponse, ReasoningConfig, StreamEvent
from routing.errors import ErrorType, UpstreamError, error_type_for_status, is_retryable, parse_retry_after
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.providers.hosted import capability
from routing.redact import SECRET_HEADERS
from routing.sse import SSEEvent, decode_sse

# Request parameters that not every wire format carries: an endpoint whose adapter does not (`parameters`) is not
# used for a request that sets one (routing.selection), so none is ever accepted and dropped.
GATED_PARAMETERS = frozenset({"stop", "seed", "logprobs", "top_logprobs"})
# Parameters whose support is the wire format's alone (a catalog entry lists the model's, whichever wire serves it):
# an endpoint whose adapter does not carry one is passed over for a request that uses it.
# `reasoning_with_forced_tool_choice`: reasoning on while tool_choice forces a call, which Anthropic's extended
# thinking cannot do (its adapter would have to drop one of them).
# `parallel_tool_calls_off` (parallel_tool_calls false) and `strict_tools` (a function tool with strict true): not
# every wire has a place for them (Bedrock's Converse has neither).
WIRE_PARAMETERS = frozenset(
    {"structured_outputs", "reasoning_with_forced_tool_choice", "parallel_tool_calls_off", "strict_tools"}
)
# Sampling fields not every wire format carries: soft (an endpoint whose wire has no place for one still serves the
# request) unless the request sets provider.require_parameters (routing.selection then passes it over).
SAMPLING_PARAMETERS = frozenset({"temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "verbosity"})
# A thinking budget as an effort (below each limit): what OpenAI's wires take instead of a budget.
EFFORT_FOR_BUDGET = ((4096, "low"), (16384, "medium"), (math.inf, "high"))
# Asked of wire formats that have no JSON mode (Anthropic, Bedrock) for response_format json_object.
JSON_INSTRUCTION = "Answer with a single JSON object and nothing else: no prose, no code fences."
ResponseStatus = Literal["completed", "incomplete"]
# An upstream stop reason as (status, incomplete reason).
StopMapping = dict[str, tuple[ResponseStatus, str | None]]


@dataclass(frozen=True)
class UpstreamRequest:
    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(repr=False)
    # The URL came from a customer's credential: the provider row's private-network switch does not apply.
    customer_url: bool = False
    content: bytes | None = field(default=None, repr=False)  # exact body bytes, when they were signed
    # The credential material the request was built from (routing.upstream scrubs it from upstream text).
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        shown = {k: ("***" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
        return f"UpstreamRequest(url={self.url!r}, headers={shown!r})"


class ProviderAdapter(ABC):
    kind: ClassVar[str]
    docs_url: ClassVar[str] = ""
    supports_embeddings: ClassVar[bool] = False
    # the GATED_PARAMETERS and WIRE_PARAMETERS this wire format carries
    parameters: ClassVar[frozenset[str]] = frozenset()
    sampling: ClassVar[frozenset[str]] = frozenset()  # the SAMPLING_PARAMETERS this wire format carries

    def prepare_credentials(self, credentials: ProviderCredentials) -> ProviderCredentials:
        """Credentials as `build_request` needs them. Identity, unless the provider needs an exchange first (a
        Vertex service account becomes a bearer token); a failed exchange raises UpstreamError."""
        return credentials

    @abstractmethod
    def build_request(
        self, request: CanonicalRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        """The upstream HTTP request for a canonical request (pure; credentials are passed in)."""

    @abstractmethod
    def parse_response(self, body: dict[str, Any]) -> CanonicalResponse:
        """A successful non-streaming upstream body as a canonical response."""

    def decode(self, chunks: Iterable[bytes]) -> Iterable[Any]:
        """The upstream stream's framing: server-sent events, unless the provider uses another one (whose frames its
        own stream_events reads)."""
        return decode_sse(chunks)

    @abstractmethod
    def stream_events(self, events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
        """Canonical events from parsed upstream SSE events; raises UpstreamError for an in-band error
        or a stream that ends before its terminal event."""

    def build_embeddings_request(
        self, request: EmbeddingRequest, *, base_url: str, credentials: ProviderCredentials
    ) -> UpstreamRequest:
        """The upstream HTTP request for embeddings (adapters with `supports_embeddings`)."""
        raise self._no_embeddings()

    def parse_embeddings(self, body: dict[str, Any], *, expected: int) -> EmbeddingResponse:
        """A successful embeddings body: exactly `expected` vectors in input order, or an UpstreamError (an adapter
        without embeddings never gets this far: its build_embeddings_request refuses first)."""
        raise self._no_embeddings()

    def _no_embeddings(self) -> UpstreamError:
        return UpstreamError(
            error_type=ErrorType.INVALID_REQUEST, message=f"{self.kind} endpoints serve no embeddings", retryable=True
        )

    def map_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        """Default mapping for JSON error bodies of the `{"error": {"message", "type", "code"}}` family."""
        message, code = error_details(body)
        error_type: str = error_type_for_status(status)
        retryable = is_retryable(status)
        if code == "context_length_exceeded" or _mentions_context_length(message):
            error_type, retryable = "context_length_exceeded", True
        elif code in ("content_filter", "content_policy_violation"):
            # One provider's content filter says nothing of another's: let the next endpoint try.
            error_type, retryable = "content_policy_violation", True
        return UpstreamError(
            error_type=error_type,
            message=message,
            retryable=retryable,
            status=status,
            retry_after=parse_retry_after(headers),
            provider_code=code,
        )


def token_count(value: object) -> int:
    """A token count as the provider reported it, or 0 when it is not a finite number: a broken or hostile usage
    field must not fail an answer whose content is complete (billing then estimates from the text and records it)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return 0


def as_mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def error_details(body: bytes) -> tuple[str, str | None]:
    """(message, code) from an upstream error body; a generic message when it is not JSON."""
    try:
        payload = jsonsafe.loads(body or b"{}")
    except ValueError:
        return "Provider returned error", None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or "Provider returned error")
        code = error.get("code") or error.get("type")
        return message[:500], str(code) if code is not None else None
    if isinstance(error, str):
        return error[:500], None
    for key in ("message", "detail"):
        if isinstance(payload, dict) and isinstance(payload.get(key), str):
            return payload[key][:500], None
    return "Provider returned error", None


def _mentions_context_length(message: str) -> bool:
    lowered = message.lower()
    return "context length" in lowered or "context_length" in lowered or "prompt is too long" in lowered


def stream_cut_error() -> UpstreamError:
    return UpstreamError(
        error_type="provider_unavailable",
        message="The provider's stream ended before the response was complete",
        retryable=True,
    )


def bearer(credentials: ProviderCredentials) -> dict[str, str]:
    return {"Authorization": f"Bearer {credentials.api_key}"}


def drop_none(mapping: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if value is not None}


def merge_turn(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Providers that want user and assistant turns to alternate (Anthropic, Bedrock): merge same-role turns."""
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)
    else:
        messages.append({"role": role, "content": list(blocks)})


def arguments_object(raw: str) -> dict[str, Any]:
    """Function-call arguments (a JSON string) as the object providers with native tool input expect."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"value": value}


def reasoning_effort(reasoning: ReasoningConfig | None) -> str | None:
    """The effort to send a wire that takes an effort only (OpenAI's): the one asked for, else the nearest to a
    thinking budget, else medium when reasoning is merely enabled; none when it is off or not asked for."""
    if reasoning is None or reasoning.enabled is False:
        return None
    if reasoning.effort:
        return reasoning.effort
    if reasoning.max_tokens:
        return next(effort for limit, effort in EFFORT_FOR_BUDGET if reasoning.max_tokens < limit)
    return "medium" if reasoning.enabled else None


def forces_tool(choice: str | dict[str, Any] | None) -> bool:
    """Whether a tool choice makes the model call a tool: required, one tool by name or type, or allowed tools in
    required mode."""
    if isinstance(choice, dict):
        return choice.get("type") != "allowed_tools" or choice.get("mode") == "required"
    return choice == "required"


def allowed_tools_applied(request: CanonicalRequest) -> CanonicalRequest:
    """For a wire with no allowed-tools form (Anthropic's, Bedrock's, Chat Completions as most providers speak it):
    {type: allowed_tools, mode, tools} becomes the tool list filtered to those tools with tool_choice `mode`
    (auto or required), which lets the model call the same tools. Any other request is returned as it is."""
    choice = request.tool_choice
    if not isinstance(choice, dict) or choice.get("type") != "allowed_tools":
        return request
    references = [reference for reference in choice.get("tools") or () if isinstance(reference, dict)]
    names = {reference.get("name") for reference in references if reference.get("type") == "function"}
    return replace(
        request,
        tools=tuple(tool for tool in request.tools if tool.name in names),
        hosted_tools=tuple(tool for tool in request.hosted_tools if _allowed_hosted(tool.spec, references)),
        tool_choice=choice.get("mode") or "auto",
    )


def _allowed_hosted(spec: dict[str, Any], references: list[dict[str, Any]]) -> bool:
    """Whether allowed_tools references name this provider-run tool (by what it runs; an MCP server by label)."""
    runs = capability(str(spec.get("type")))
    return any(
        runs
        and capability(str(reference.get("type"))) == runs
        and reference.get("server_label", spec.get("server_label")) == spec.get("server_label")
        for reference in references
    )
