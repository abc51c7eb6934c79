"""OpenAI Chat Completions response body and stream chunks -> canonical.
https://platform.openai.com/docs/api-reference/chat/object
https://platform.openai.com/docs/api-reference/chat-streaming"""

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from routing.canonical import (
    CanonicalResponse,
    Finished,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    RefusalDelta,
    ResponseStarted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)
from routing.errors import ErrorType, UpstreamError
from routing.providers.base import StopMapping, as_mapping, error_details, stream_cut_error, token_count
from routing.providers.logprobs import parse_tokens
from routing.providers.openai_chat import web_search
from routing.sse import SSEEvent

# finish_reason -> (status, incomplete reason)
FINISH: StopMapping = {
    "stop": ("completed", None),
    "tool_calls": ("completed", None),
    "function_call": ("completed", None),
    "length": ("incomplete", "max_output_tokens"),
    "content_filter": ("incomplete", "content_filter"),
}


def usage(raw: object) -> Usage:
    raw = as_mapping(raw)
    prompt_details = as_mapping(raw.get("prompt_tokens_details"))
    completion_details = as_mapping(raw.get("completion_tokens_details"))
    return Usage(
        input_tokens=token_count(raw.get("prompt_tokens")),
        cached_tokens=token_count(prompt_details.get("cached_tokens")),
        cache_write_tokens=token_count(prompt_details.get("cache_write_tokens")),
        output_tokens=token_count(raw.get("completion_tokens")),
        reasoning_tokens=token_count(completion_details.get("reasoning_tokens")),
    )


def _reasoning_text(holder: dict[str, Any]) -> str | None:
    # OpenAI-compatible servers name it `reasoning_content` (DeepSeek, vLLM) or `reasoning` (Groq, OpenRouter).
    return holder.get("reasoning_content") or holder.get("reasoning")


MSG_ERROR_IN_200 = "The provider answered with an error instead of a completion"


def parse(body: dict[str, Any]) -> CanonicalResponse:
    if not body.get("choices") and isinstance(body.get("error"), dict | str):
        # Some OpenAI-compatible servers answer 200 with only an error object: a failed attempt, not an empty answer.
        raise UpstreamError(error_type=ErrorType.PROVIDER_UNAVAILABLE, message=MSG_ERROR_IN_200, retryable=True)
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[OutputItem] = []
    reasoning = _reasoning_text(message)
    if reasoning:
        output.append(OutputReasoning(content=(reasoning,)))
    if message.get("content") or message.get("refusal"):
        logprobs = parse_tokens(as_mapping(choice.get("logprobs")).get("content"))
        output.append(
            OutputMessage(text=message.get("content") or "", refusal=message.get("refusal"), logprobs=logprobs)
        )
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append(
            OutputFunctionCall(
                call_id=call.get("id", ""), name=function.get("name", ""), arguments=function.get("arguments") or ""
            )
        )
    status, reason = FINISH.get(choice.get("finish_reason") or "stop", ("completed", None))
    parsed = CanonicalResponse(
        output=tuple(output),
        usage=usage(body.get("usage")),
        status=status,
        incomplete_reason=reason,
        upstream_id=body.get("id"),
        model=body.get("model"),
        service_tier=body.get("service_tier"),
    )
    return web_search.with_citations(parsed, message)


def stream(events: Iterable[SSEEvent]) -> Iterator[StreamEvent]:
    started = False
    finish: Finished | None = None
    searched = 0  # a cited answer of a search model: one search
    for event in events:
        if event.data.strip() == "[DONE]":
            yield finish or Finished()
            return
        chunk = event.json()
        if "error" in chunk:
            message, code = error_details(event.data.encode())
            raise UpstreamError(error_type="provider_unavailable", message=message, retryable=True, provider_code=code)
        if not started and chunk.get("id"):  # Azure opens with an id-less content-filter chunk
            started = True
            yield ResponseStarted(upstream_id=chunk.get("id"), model=chunk.get("model"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = _reasoning_text(delta)
            if reasoning:
                yield ReasoningDelta(text=reasoning)
            if content := delta.get("content"):
                logprobs = choice.get("logprobs")  # null on nearly every chunk: nothing to parse then
                tokens = parse_tokens(logprobs.get("content")) if isinstance(logprobs, dict) else ()
                yield TextDelta(text=content, logprobs=tokens)
            if delta.get("refusal"):
                yield RefusalDelta(text=delta["refusal"])
            if "annotations" in delta:
                for cited in web_search.delta_annotations(delta):  # a search model's citations
                    searched = 1
                    yield cited
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", 0))
                function = call.get("function") or {}
                if call.get("id"):
                    yield ToolCallStarted(index=index, call_id=call["id"], name=function.get("name", ""))
                if function.get("arguments"):
                    yield ToolCallDelta(index=index, arguments=function["arguments"])
            if choice.get("finish_reason"):
                status, reason = FINISH.get(choice["finish_reason"], ("completed", None))
                finish = Finished(status=status, incomplete_reason=reason, service_tier=chunk.get("service_tier"))
        if chunk.get("usage"):
            yield UsageReported(usage=replace(usage(chunk["usage"]), web_search_requests=searched))
    if finish is None:
        raise stream_cut_error()
    yield finish  # some compatible servers end after the finish chunk without [DONE]
