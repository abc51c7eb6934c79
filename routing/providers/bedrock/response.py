"""Bedrock Converse and ConverseStream -> canonical.
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html"""

import json
from collections.abc import Iterable, Iterator
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
from routing.errors import UpstreamError, error_type_for_status
from routing.providers.base import StopMapping, as_mapping, stream_cut_error, token_count
from routing.providers.bedrock.eventstream import StreamMessage
from routing.providers.bedrock.request import FORMAT


def stop_sequence(holder: dict[str, Any]) -> str | None:
    """The stop sequence that ended the answer: in additionalModelResponseFields when the request asked for
    /stop_sequence and the model reports it (stopReason "stop_sequence")."""
    value = as_mapping(holder.get("additionalModelResponseFields")).get("stop_sequence")
    return value if holder.get("stopReason") == "stop_sequence" and isinstance(value, str) else None


STOP: StopMapping = {
    "end_turn": ("completed", None),
    "tool_use": ("completed", None),
    "stop_sequence": ("completed", None),
    "max_tokens": ("incomplete", "max_output_tokens"),
    "model_context_window_exceeded": ("incomplete", "max_output_tokens"),
    "guardrail_intervened": ("incomplete", "content_filter"),
    "content_filtered": ("incomplete", "content_filter"),
}
EXCEPTION_STATUS = {
    "throttlingException": 429,
    "modelStreamErrorException": 424,
    "internalServerException": 500,
    "serviceUnavailableException": 503,
    "validationException": 400,
    "modelTimeoutException": 408,
}


def usage(raw: object) -> Usage:
    raw = as_mapping(raw)
    cache_read = token_count(raw.get("cacheReadInputTokens"))
    cache_write = token_count(raw.get("cacheWriteInputTokens"))
    return Usage(
        input_tokens=token_count(raw.get("inputTokens")) + cache_read + cache_write,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=token_count(raw.get("outputTokens")),
    )


def parse(body: dict[str, Any]) -> CanonicalResponse:
    output: list[OutputItem] = []
    texts: list[str] = []
    calls: list[OutputFunctionCall] = []
    for block in ((body.get("output") or {}).get("message") or {}).get("content") or []:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            tool = block["toolUse"]
            calls.append(
                OutputFunctionCall(
                    call_id=tool.get("toolUseId", ""),
                    name=tool.get("name", ""),
                    arguments=json.dumps(tool.get("input") or {}, separators=(",", ":")),
                )
            )
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"].get("reasoningText") or {}
            output.append(
                OutputReasoning(
                    content=(reasoning.get("text", ""),), signature=reasoning.get("signature"), format=FORMAT
                )
            )
    if texts:
        output.append(OutputMessage(text="".join(texts), stop_sequence=stop_sequence(body)))
    output.extend(calls)
    status, reason = STOP.get(body.get("stopReason") or "end_turn", ("completed", None))
    return CanonicalResponse(
        output=tuple(output), usage=usage(body.get("usage")), status=status, incomplete_reason=reason
    )


def _exception(message: StreamMessage) -> UpstreamError:
    status = EXCEPTION_STATUS.get(message.event_type, 500)
    return UpstreamError(
        error_type=error_type_for_status(status),
        retryable=status != 400,
        status=status,
        message=str(message.payload.get("message") or "Provider returned error")[:500],
        provider_code=message.event_type,
    )


def stream(messages: Iterable[StreamMessage]) -> Iterator[StreamEvent]:
    tools: dict[int, int] = {}
    finish: Finished | None = None
    for message in messages:
        if message.is_exception:
            raise _exception(message)
        kind, payload = message.event_type, message.payload
        if kind == "messageStart":
            yield ResponseStarted()
        elif kind == "contentBlockStart":
            tool = (payload.get("start") or {}).get("toolUse")
            if tool:
                tools[payload.get("contentBlockIndex", 0)] = index = len(tools)
                yield ToolCallStarted(index=index, call_id=tool.get("toolUseId", ""), name=tool.get("name", ""))
        elif kind == "contentBlockDelta":
            delta = payload.get("delta") or {}
            if "text" in delta:
                yield TextDelta(text=delta["text"])
            elif "toolUse" in delta and delta["toolUse"].get("input"):
                yield ToolCallDelta(
                    index=tools.get(payload.get("contentBlockIndex", 0), 0), arguments=delta["toolUse"]["input"]
                )
            elif "reasoningContent" in delta:
                reasoning = delta["reasoningContent"]
                if reasoning.get("text"):
                    yield ReasoningDelta(text=reasoning["text"])
                if reasoning.get("signature"):
                    yield ReasoningSealed(signature=reasoning["signature"], format=FORMAT)
        elif kind == "messageStop":
            status, reason = STOP.get(payload.get("stopReason") or "end_turn", ("completed", None))
            finish = Finished(status=status, incomplete_reason=reason, stop_sequence=stop_sequence(payload))
        elif kind == "metadata":
            yield UsageReported(usage=usage(payload.get("usage")))
            if finish is not None:
                yield finish
                return
    if finish is None:
        raise stream_cut_error()
    yield finish
