"""Anthropic Messages body and stream events -> canonical.
https://docs.anthropic.com/en/api/messages  https://docs.anthropic.com/en/docs/build-with-claude/streaming"""

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from routing.canonical import (
    CanonicalResponse,
    Finished,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    ResponseStarted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)
from routing.errors import UpstreamError
from routing.providers.anthropic import web_search
from routing.providers.anthropic.request import FORMAT
from routing.providers.base import StopMapping, as_mapping, stream_cut_error, token_count
from routing.sse import SSEEvent

# The most of a reasoning signature this adapter gathers (it arrives in deltas) before handing it on: above any
# output bound (routing.output_bound), so a signature that passes it is cut there instead of held without end.
PENDING_BYTES = 8 * 1024 * 1024

STOP: StopMapping = {
    "end_turn": ("completed", None),
    "stop_sequence": ("completed", None),
    "tool_use": ("completed", None),
    "pause_turn": ("completed", None),
    "max_tokens": ("incomplete", "max_output_tokens"),
    "model_context_window_exceeded": ("incomplete", "max_output_tokens"),
    "refusal": ("incomplete", "content_filter"),
}

ERROR_TYPES = {
    "invalid_request_error": ("invalid_request", False),
    "authentication_error": ("authentication", True),
    "permission_error": ("permission_denied", True),
    "not_found_error": ("not_found", True),
    "request_too_large": ("payload_too_large", False),
    "rate_limit_error": ("rate_limit_exceeded", True),
    "api_error": ("provider_unavailable", True),
    "overloaded_error": ("provider_overloaded", True),
    "timeout_error": ("timeout", True),
}


def usage(raw: object, output_tokens: int | None = None) -> Usage:
    raw = as_mapping(raw)
    cache_read = token_count(raw.get("cache_read_input_tokens"))
    cache_write = token_count(raw.get("cache_creation_input_tokens"))
    # Anthropic's input_tokens exclude cached and cache-written tokens; ours include them.
    return Usage(
        input_tokens=token_count(raw.get("input_tokens")) + cache_read + cache_write,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=token_count(output_tokens if output_tokens is not None else raw.get("output_tokens")),
        web_search_requests=web_search.searches(raw),
    )


def stop_sequence(holder: Mapping[str, Any]) -> str | None:
    """The caller's stop sequence that ended the answer (stop_reason "stop_sequence" names it in `stop_sequence`)."""
    value = holder.get("stop_sequence")
    return value if holder.get("stop_reason") == "stop_sequence" and isinstance(value, str) else None


def parse(body: dict[str, Any]) -> CanonicalResponse:
    output: list[OutputItem] = []
    texts: list[str] = []
    calls: list[OutputFunctionCall] = []
    for block in body.get("content") or []:
        kind = block.get("type")
        if kind == "thinking":
            output.append(
                OutputReasoning(content=(block.get("thinking", ""),), signature=block.get("signature"), format=FORMAT)
            )
        elif kind == "redacted_thinking":
            output.append(OutputReasoning(encrypted_content=block.get("data"), format=FORMAT))
        elif kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_use":
            calls.append(
                OutputFunctionCall(
                    call_id=block.get("id", ""),
                    name=block.get("name", ""),
                    arguments=json.dumps(block.get("input") or {}, separators=(",", ":")),
                )
            )
    if texts:
        output.append(OutputMessage(text="".join(texts), stop_sequence=stop_sequence(body)))
    output.extend(calls)
    status, reason = STOP.get(body.get("stop_reason") or "end_turn", ("completed", None))
    parsed = CanonicalResponse(
        output=tuple(output),
        usage=usage(body.get("usage")),
        status=status,
        incomplete_reason=reason,
        upstream_id=body.get("id"),
        model=body.get("model"),
    )
    return web_search.with_searches(parsed, body.get("content"))


def stream_error(payload: dict[str, Any]) -> UpstreamError:
    error = payload.get("error") or {}
    error_type, retryable = ERROR_TYPES.get(str(error.get("type")), ("provider_unavailable", True))
    return UpstreamError(
        error_type=error_type,
        message=str(error.get("message") or "Provider returned error")[:500],
        retryable=retryable,
        provider_code=error.get("type"),
    )


def stream(events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
    input_usage: Mapping[str, Any] = {}
    tool_index: dict[int, int] = {}  # content block index -> tool call index
    signature: list[str] = []
    signed = 0  # the signature's characters gathered
    finish: Finished | None = None
    searching = web_search.SearchStream()  # Anthropic's own web search: its blocks and citations
    for event in events:
        payload = event.json()
        kind = payload.get("type", event.event)
        if (taken := searching.take(kind, payload)) is not None:
            yield from taken
            continue
        if kind == "message_start":
            message = payload.get("message") or {}
            input_usage = as_mapping(message.get("usage"))
            yield ResponseStarted(upstream_id=message.get("id"), model=message.get("model"))
        elif kind == "content_block_start":
            block = payload.get("content_block") or {}
            if block.get("type") == "tool_use":
                tool_index[payload.get("index", 0)] = index = len(tool_index)
                yield ToolCallStarted(index=index, call_id=block.get("id", ""), name=block.get("name", ""))
            elif block.get("type") == "redacted_thinking":
                yield ReasoningSealed(encrypted_content=block.get("data"), format=FORMAT)
        elif kind == "content_block_delta":
            delta = payload.get("delta") or {}
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                yield TextDelta(text=delta.get("text", ""))
            elif delta_type == "thinking_delta":
                yield ReasoningDelta(text=delta.get("thinking", ""))
            elif delta_type == "signature_delta":
                part = str(delta.get("signature") or "")
                signature.append(part)
                signed += len(part)
                if signed > PENDING_BYTES:  # handed on now: the output bound cuts the answer there
                    yield ReasoningSealed(signature="".join(signature), format=FORMAT)
                    signature, signed = [], 0
            elif delta_type == "input_json_delta" and delta.get("partial_json"):
                yield ToolCallDelta(
                    index=tool_index.get(payload.get("index", 0), 0), arguments=delta.get("partial_json", "")
                )
        elif kind == "content_block_stop" and signature:
            yield ReasoningSealed(signature="".join(signature), format=FORMAT)
            signature, signed = [], 0
        elif kind == "message_delta":
            delta = as_mapping(payload.get("delta"))
            stop_reason = delta.get("stop_reason")
            output_tokens = as_mapping(payload.get("usage")).get("output_tokens")
            yield UsageReported(usage=usage({**input_usage, **as_mapping(payload.get("usage"))}, output_tokens))
            if stop_reason:
                status, reason = STOP.get(stop_reason, ("completed", None))
                finish = Finished(status=status, incomplete_reason=reason, stop_sequence=stop_sequence(delta))
        elif kind == "message_stop":
            yield finish or Finished()
            return
        elif kind == "error":
            raise stream_error(payload)
    raise stream_cut_error()
