"""The Response result object and its output items (spec "Response result")."""

import secrets
import time
from dataclasses import dataclass

from routing.canonical import (
    CanonicalResponse,
    OutputFunctionCall,
    OutputHostedTool,
    OutputMessage,
    OutputReasoning,
    Usage,
)
from routing.providers.logprobs import token_dicts
from routing.stages import ServerToolItem

# Responses `error.code` for a canonical error type (reference 1.6).
ERROR_CODES = {
    "rate_limit_exceeded": "rate_limit_exceeded",
    "context_length_exceeded": "invalid_prompt",
    "invalid_request": "invalid_prompt",
    "content_policy_violation": "image_content_policy_violation",
}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def message_item(item_id: str, message: OutputMessage, status: str = "completed") -> dict:
    """A message output item: its output_text part carries the token logprobs when they were asked for; the stop
    sequence that ended it (asked for on /chat/completions and /messages only) is kept for those front doors."""
    content = []
    if message.text or not message.refusal:
        content.append(
            {
                "type": "output_text",
                "text": message.text,
                "annotations": list(message.annotations),
                "logprobs": token_dicts(message.logprobs),
            }
        )
    if message.refusal:
        content.append({"type": "refusal", "refusal": message.refusal})
    item = {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": content}
    if message.stop_sequence is not None:
        item["stop_sequence"] = message.stop_sequence
    return item


def reasoning_item(item_id: str, item: OutputReasoning, status: str = "completed") -> dict:
    out = {
        "type": "reasoning",
        "id": item_id,
        "status": status,
        "summary": [{"type": "summary_text", "text": text} for text in item.summary],
        "content": [{"type": "reasoning_text", "text": text} for text in item.content],
        "format": item.format,
    }
    if item.signature:
        out["signature"] = item.signature
    if item.encrypted_content:
        out["encrypted_content"] = item.encrypted_content
    return out


def function_call_item(item_id: str, item: OutputFunctionCall, status: str = "completed") -> dict:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": item.call_id,
        "name": item.name,
        "arguments": item.arguments,
        "status": status,
    }


def output_items(response: CanonicalResponse) -> list[dict]:
    items = []
    for item in response.output:
        if isinstance(item, OutputMessage):
            items.append(message_item(new_id("msg"), item))
        elif isinstance(item, OutputReasoning):
            items.append(reasoning_item(new_id("rs"), item))
        elif isinstance(item, OutputFunctionCall):
            items.append(function_call_item(new_id("fc"), item))
        elif isinstance(item, ServerToolItem):  # a server tool call the gateway ran (plugins.server_tools)
            items.append(item.item)
        elif isinstance(item, OutputHostedTool):  # a tool call the provider ran (web_search_call, ...)
            items.append(item.item)
    return items


def usage_block(usage: Usage, *, cost: float, is_byok: bool, upstream_cost: tuple[float, float, float]) -> dict:
    """`upstream_cost`: (total, input, output) list-price inference cost."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": usage.cache_write_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
        "cost": cost,
        "is_byok": is_byok,
        "cost_details": {
            "upstream_inference_cost": upstream_cost[0],
            "upstream_inference_input_cost": upstream_cost[1],
            "upstream_inference_output_cost": upstream_cost[2],
        },
    }


@dataclass
class ResultShell:
    """The parts of a result known before the upstream answers (echoes of the request)."""

    id: str
    created_at: int
    requested_model: str
    data: dict

    def render(
        self,
        *,
        status: str,
        model: str | None = None,
        output: list | None = None,
        usage: dict | None = None,
        incomplete_reason: str | None = None,
        error: dict | None = None,
        error_type: str | None = None,
        service_tier: str | None = None,
        metadata: dict | None = None,
    ) -> dict:
        data = self.data
        text = data.get("text") or {}
        result = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": int(time.time()) if status in ("completed", "incomplete", "failed") else None,
            "model": model or self.requested_model,
            "status": status,
            "output": output or [],
            "error": error,
            "incomplete_details": {"reason": incomplete_reason} if status == "incomplete" else None,
            "instructions": data.get("instructions"),
            "metadata": data.get("metadata"),
            "tools": data.get("tools") or [],
            "tool_choice": data.get("tool_choice", "auto"),
            "parallel_tool_calls": data.get("parallel_tool_calls")
            if data.get("parallel_tool_calls") is not None
            else True,
            "temperature": data.get("temperature"),
            "top_p": data.get("top_p"),
            "presence_penalty": data.get("presence_penalty"),
            "frequency_penalty": data.get("frequency_penalty"),
            "top_logprobs": data.get("top_logprobs"),
            "max_output_tokens": data.get("max_output_tokens"),
            "max_tool_calls": data.get("max_tool_calls"),
            "background": False,
            "store": False,
            "previous_response_id": None,
            "reasoning": data.get("reasoning"),
            "service_tier": service_tier or data.get("service_tier") or "auto",
            "text": {"format": text.get("format") or {"type": "text"}, "verbosity": text.get("verbosity")},
            "truncation": data.get("truncation") or "disabled",
            "prompt_cache_key": data.get("prompt_cache_key"),
            "safety_identifier": data.get("safety_identifier"),
            "user": data.get("user"),
        }
        if usage is not None:
            result["usage"] = usage
        if error_type:
            result["error_type"] = error_type
        if metadata is not None:
            result["gateway_metadata"] = metadata
        return result


def failure_error(error_type: str, message: str) -> dict:
    return {"code": ERROR_CODES.get(error_type, "server_error"), "message": message}
