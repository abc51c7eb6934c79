"""OpenAI Responses body and stream events -> canonical.
https://platform.openai.com/docs/api-reference/responses/object
https://platform.openai.com/docs/api-reference/responses-streaming"""

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from routing.canonical import (
    CanonicalResponse,
    Finished,
    HostedToolCall,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    ResponseStarted,
    StreamEvent,
    TextAnnotated,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)
from routing.errors import UpstreamError
from routing.providers.base import ResponseStatus, as_mapping, stream_cut_error, token_count
from routing.providers.hosted import hosted_item
from routing.providers.logprobs import parse_tokens
from routing.providers.openai_responses import hosted
from routing.providers.openai_responses.request import FORMAT
from routing.sse import SSEEvent


def usage(raw: object) -> Usage:
    raw = as_mapping(raw)
    return Usage(
        input_tokens=token_count(raw.get("input_tokens")),
        cached_tokens=token_count(as_mapping(raw.get("input_tokens_details")).get("cached_tokens")),
        output_tokens=token_count(raw.get("output_tokens")),
        reasoning_tokens=token_count(as_mapping(raw.get("output_tokens_details")).get("reasoning_tokens")),
    )


def _status(body: dict[str, Any]) -> tuple[ResponseStatus, str | None]:
    if body.get("status") == "incomplete":
        return "incomplete", (body.get("incomplete_details") or {}).get("reason") or "max_output_tokens"
    return "completed", None


def _output_item(item: dict[str, Any]) -> OutputItem | None:
    kind = item.get("type")
    if kind == "message":
        texts, refusals = [], []
        logprobs: list[TokenLogprob] = []
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                texts.append(part.get("text", ""))
                logprobs += parse_tokens(part.get("logprobs"))
            elif part.get("type") == "refusal":
                refusals.append(part.get("refusal", ""))
        return OutputMessage(text="".join(texts), refusal="".join(refusals) or None, logprobs=tuple(logprobs))
    if kind == "reasoning":
        return OutputReasoning(
            summary=tuple(p.get("text", "") for p in item.get("summary") or []),
            content=tuple(p.get("text", "") for p in item.get("content") or []),
            encrypted_content=item.get("encrypted_content"),
            format=FORMAT,
        )
    if kind == "function_call":
        return OutputFunctionCall(
            call_id=item.get("call_id", ""), name=item.get("name", ""), arguments=item.get("arguments", "")
        )
    return None  # a call OpenAI ran: hosted.with_hosted


def parse(body: dict[str, Any]) -> CanonicalResponse:
    status, reason = _status(body)
    items = [item for item in body.get("output") or [] if isinstance(item, dict)]
    output = tuple(out for item in items if (out := hosted.with_hosted(item, _output_item(item))) is not None)
    return CanonicalResponse(
        output=output,
        usage=replace(usage(body.get("usage")), web_search_requests=hosted.searches(output)),
        status=status,
        incomplete_reason=reason,
        upstream_id=body.get("id"),
        model=body.get("model"),
        service_tier=body.get("service_tier"),
    )


def _failure(payload: dict[str, Any]) -> UpstreamError:
    error = payload.get("error") or (payload.get("response") or {}).get("error") or payload
    code = error.get("code") if isinstance(error, dict) else None
    message = (error.get("message") if isinstance(error, dict) else None) or "Provider returned error"
    error_type = "rate_limit_exceeded" if code == "rate_limit_exceeded" else "provider_unavailable"
    return UpstreamError(error_type=error_type, message=str(message)[:500], retryable=True, provider_code=code)


def stream(events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
    calls: dict[int, int] = {}  # output_index -> tool call index
    searched = 0  # web searches OpenAI ran (billed per search)
    for event in events:
        if event.data.strip() == "[DONE]":
            break
        payload = event.json()
        kind = payload.get("type", event.event)
        if kind == "response.created":
            response = payload.get("response") or {}
            yield ResponseStarted(upstream_id=response.get("id"), model=response.get("model"))
        elif kind == "response.output_text.delta":
            yield TextDelta(text=payload.get("delta", ""), logprobs=parse_tokens(payload.get("logprobs")))
        elif kind == "response.refusal.delta":
            yield RefusalDelta(text=payload.get("delta", ""))
        elif kind == "response.reasoning_summary_text.delta":
            yield ReasoningDelta(text=payload.get("delta", ""), kind="summary")
        elif kind == "response.reasoning_text.delta":
            yield ReasoningDelta(text=payload.get("delta", ""), kind="content")
        elif kind == "response.output_item.added" and (payload.get("item") or {}).get("type") == "function_call":
            item = payload["item"]
            calls[payload.get("output_index", len(calls))] = index = len(calls)
            yield ToolCallStarted(index=index, call_id=item.get("call_id", ""), name=item.get("name", ""))
        elif kind == "response.function_call_arguments.delta":
            index = calls.get(payload.get("output_index"), 0)
            yield ToolCallDelta(index=index, arguments=payload.get("delta", ""))
        elif kind == "response.output_item.done" and (payload.get("item") or {}).get("type") == "reasoning":
            yield ReasoningSealed(encrypted_content=payload["item"].get("encrypted_content"), format=FORMAT)
        elif kind == "response.output_item.done" and (call := hosted_item(payload.get("item") or {})) is not None:
            searched += hosted.searches((call,))
            yield HostedToolCall(call)  # a call OpenAI ran (web_search_call, ...)
        elif kind == "response.output_text.annotation.added":
            if found := hosted.annotation(payload.get("annotation")):
                yield TextAnnotated(found)  # a citation (indexed in its output_text part: one part per message)
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response") or {}
            yield UsageReported(usage=replace(usage(response.get("usage")), web_search_requests=searched))
            status, reason = _status(response)
            yield Finished(status=status, incomplete_reason=reason, service_tier=response.get("service_tier"))
            return
        elif kind in ("response.failed", "error"):
            raise _failure(payload)
    raise stream_cut_error()
