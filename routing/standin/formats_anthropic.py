"""The Anthropic Messages and Bedrock Converse wire formats as the stand-in speaks them: bodies, stream events and
error bodies, shaped like the real providers' (the OpenAI ones, and the plan every format follows: formats.py)."""

import json
import uuid
from typing import Any

from routing.providers.bedrock.eventstream import event, exception
from routing.standin.formats import Plan, calls, split, sse

ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def anthropic_error(status: int) -> dict[str, Any]:
    error_type, message = ANTHROPIC_ERRORS.get(status, ("api_error", "Internal server error"))
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }


def _anthropic_stop(plan: Plan) -> str:
    if plan.tool_name:
        return "tool_use"
    if plan.finish == "length":
        return "max_tokens"
    return "stop_sequence" if plan.stop_sequence is not None else "end_turn"


def _anthropic_usage(plan: Plan) -> dict[str, Any]:
    return {
        "input_tokens": plan.input_tokens - plan.cached_tokens,
        "cache_read_input_tokens": plan.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": plan.output_tokens,
    }


def messages_body(plan: Plan) -> dict[str, Any]:
    content = []
    if plan.reasoning:
        content.append(
            {"type": "thinking", "thinking": plan.reasoning, "signature": plan.signature or "standin-signature"}
        )
    if plan.text:
        content.append({"type": "text", "text": plan.text})
    content += [
        {"type": "tool_use", "id": f"toolu_standin_{n}", "name": plan.tool_name, "input": json.loads(arguments or "{}")}
        for n, arguments in calls(plan)
    ]
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": plan.model,
        "content": content,
        "stop_reason": _anthropic_stop(plan),
        "stop_sequence": plan.stop_sequence if _anthropic_stop(plan) == "stop_sequence" else None,
        "usage": _anthropic_usage(plan),
    }


def messages_stream(plan: Plan) -> tuple[list[bytes], bytes]:
    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, event=kind)

    start = {
        **messages_body(plan),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_anthropic_usage(plan), "output_tokens": 1},
    }
    out = [event("message_start", message=start)]
    index = 0
    if plan.reasoning:
        out.append(
            event(
                "content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""}
            )
        )
        out += [
            event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
            for piece in split(plan.reasoning, plan.chunks)
        ]
        out.append(
            event(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": plan.signature or "standin-signature"},
            )
        )
        out.append(event("content_block_stop", index=index))
        index += 1
    if plan.text:
        out.append(event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
        out += [
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            for piece in split(plan.text, plan.chunks)
        ]
        out.append(event("content_block_stop", index=index))
        index += 1
    for n, arguments in calls(plan):
        block = {"type": "tool_use", "id": f"toolu_standin_{n}", "name": plan.tool_name, "input": {}}
        out.append(event("content_block_start", index=index, content_block=block))
        out += [
            event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
            for piece in split(arguments, 2)
        ]
        out.append(event("content_block_stop", index=index))
        index += 1
    terminal = event(
        "message_delta",
        delta={"stop_reason": _anthropic_stop(plan), "stop_sequence": messages_body(plan)["stop_sequence"]},
        usage={"output_tokens": plan.output_tokens},
    ) + event("message_stop")
    return out, terminal


def messages_stream_error(status: int) -> bytes:
    return sse(anthropic_error(status), event="error")


# ---- Amazon Bedrock Converse -------------------------------------------------------------------

BEDROCK_ERRORS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def bedrock_error(status: int) -> dict[str, Any]:
    return {"message": f"{BEDROCK_ERRORS.get(status, 'InternalServerException')} from the stand-in"}


def _converse_stop(plan: Plan) -> str:
    return _anthropic_stop(plan)  # Converse names its stop reasons as Anthropic does (end_turn, stop_sequence, ...)


def _converse_usage(plan: Plan) -> dict[str, Any]:
    return {
        "inputTokens": plan.input_tokens - plan.cached_tokens,
        "outputTokens": plan.output_tokens,
        "totalTokens": plan.input_tokens + plan.output_tokens,
        "cacheReadInputTokens": plan.cached_tokens,
    }


def converse_body(plan: Plan) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if plan.reasoning:
        content.append({"reasoningContent": {"reasoningText": {"text": plan.reasoning, "signature": "standin-sig"}}})
    if plan.text:
        content.append({"text": plan.text})
    if plan.tool_name:
        content.append(
            {
                "toolUse": {
                    "toolUseId": "tooluse_standin_1",
                    "name": plan.tool_name,
                    "input": json.loads(plan.tool_arguments or "{}"),
                }
            }
        )
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _converse_stop(plan),
        **_converse_stop_field(plan),
        "usage": _converse_usage(plan),
        "metrics": {"latencyMs": 1},
    }


def _converse_stop_field(plan: Plan) -> dict[str, Any]:
    """The stop sequence as Claude on Bedrock reports it, when the request asked for it."""
    if plan.stop_field and _converse_stop(plan) == "stop_sequence":
        return {"additionalModelResponseFields": {"stop_sequence": plan.stop_sequence}}
    return {}


def converse_stream(plan: Plan) -> tuple[list[bytes], bytes]:
    out = [event("messageStart", {"role": "assistant"})]
    index = 0
    if plan.reasoning:
        out += [
            event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"reasoningContent": {"text": p}}})
            for p in split(plan.reasoning, plan.chunks)
        ]
        out.append(
            event(
                "contentBlockDelta",
                {"contentBlockIndex": index, "delta": {"reasoningContent": {"signature": "standin-sig"}}},
            )
        )
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if plan.text:
        out += [
            event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}})
            for piece in split(plan.text, plan.chunks)
        ]
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if plan.tool_name:
        out.append(
            event(
                "contentBlockStart",
                {
                    "contentBlockIndex": index,
                    "start": {"toolUse": {"toolUseId": "tooluse_standin_1", "name": plan.tool_name}},
                },
            )
        )
        out += [
            event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
            for piece in split(plan.tool_arguments, 2)
        ]
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
    terminal = event("messageStop", {"stopReason": _converse_stop(plan), **_converse_stop_field(plan)}) + event(
        "metadata", {"usage": _converse_usage(plan), "metrics": {"latencyMs": 1}}
    )
    return out, terminal


def converse_stream_error(status: int) -> bytes:
    kind = {429: "throttlingException", 400: "validationException"}.get(status, "internalServerException")
    return exception(kind, "stand-in failure")
