"""Canonical request -> Anthropic Messages body.
https://docs.anthropic.com/en/api/messages"""

import re
from typing import Any

from routing.canonical import (
    CanonicalRequest,
    FilePart,
    FunctionCall,
    FunctionCallOutput,
    ImagePart,
    Message,
    Part,
    Reasoning,
    TextPart,
)
from routing.providers.anthropic import web_search
from routing.providers.base import (
    JSON_INSTRUCTION,
    allowed_tools_applied,
    arguments_object,
    drop_none,
    forces_tool,
    merge_turn,
)

FORMAT = "anthropic-claude-v1"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
MIN_THINKING_BUDGET = 1024  # https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
EFFORT_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 65536}
_DATA_URL = re.compile(r"^data:(?P<media>[\w/+.-]+);base64,(?P<data>.+)$", re.DOTALL)


def _source(url: str, default_media: str) -> dict[str, Any]:
    match = _DATA_URL.match(url)
    if match:
        return {"type": "base64", "media_type": match["media"], "data": match["data"]}
    if url.startswith(("http://", "https://")):
        return {"type": "url", "url": url}
    return {"type": "base64", "media_type": default_media, "data": url}


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return drop_none({"type": "text", "text": part.text, "cache_control": part.cache_control})
    if isinstance(part, ImagePart):
        return drop_none(
            {"type": "image", "source": _source(part.url, "image/png"), "cache_control": part.cache_control}
        )
    if isinstance(part, FilePart):
        if part.file_id:
            source = {"type": "file", "file_id": part.file_id}
        else:
            source = _source(part.file_data or part.file_url or "", "application/pdf")
        return drop_none(
            {"type": "document", "source": source, "title": part.filename, "cache_control": part.cache_control}
        )
    raise TypeError(type(part))


def system_and_messages(request: CanonicalRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = [{"type": "text", "text": request.instructions}] if request.instructions else []
    messages: list[dict[str, Any]] = []
    for item in request.input:
        if isinstance(item, Message):
            blocks = [_block(part) for part in item.content]
            if item.role in ("system", "developer"):
                system.extend(block for block in blocks if block["type"] == "text")
            else:
                merge_turn(messages, item.role, blocks)
        elif isinstance(item, FunctionCall):
            merge_turn(
                messages,
                "assistant",
                [
                    drop_none(
                        {
                            "type": "tool_use",
                            "id": item.call_id,
                            "name": item.name,
                            "input": arguments_object(item.arguments),
                            "cache_control": item.cache_control,
                        }
                    )
                ],
            )
        elif isinstance(item, FunctionCallOutput):
            result = {"type": "tool_result", "tool_use_id": item.call_id, "content": item.output}
            merge_turn(messages, "user", [drop_none({**result, "cache_control": item.cache_control})])
        elif isinstance(item, Reasoning):
            if item.format == FORMAT and item.signature:
                thinking = {
                    "type": "thinking",
                    "thinking": "".join(item.content or item.summary),
                    "signature": item.signature,
                }
                merge_turn(messages, "assistant", [thinking])
            elif item.format == FORMAT and item.encrypted_content:
                merge_turn(messages, "assistant", [{"type": "redacted_thinking", "data": item.encrypted_content}])
    return system, messages


def _apply_automatic_cache(
    system: list[dict[str, Any]], messages: list[dict[str, Any]], cache_control: dict[str, Any]
) -> None:
    """Top-level cache_control: one breakpoint on the last cacheable block (the prompt's end)."""
    for message in reversed(messages):
        for block in reversed(message["content"]):
            if block["type"] in ("text", "image", "document", "tool_result", "tool_use"):
                block.setdefault("cache_control", cache_control)
                return
    if system:
        system[-1].setdefault("cache_control", cache_control)


def _tool_choice(choice: str | dict[str, Any] | None, parallel: bool | None) -> dict[str, Any] | None:
    """Anthropic's {type: auto|any|tool|none, disable_parallel_tool_use}. A provider-run tool chosen by type is
    web search (the only one this wire runs: planning routes no other here), chosen by web_search.tool_choice."""
    if choice is None and parallel is None:
        return None
    if isinstance(choice, dict) and choice.get("type") == "function":
        result = {"type": "tool", "name": choice["name"]}
    else:
        result = {"type": {"required": "any", "none": "none"}.get(choice if isinstance(choice, str) else "", "auto")}
    if parallel is False and result["type"] != "none":
        result["disable_parallel_tool_use"] = True
    return result


def _thinking(request: CanonicalRequest, max_tokens: int) -> dict[str, Any] | None:
    reasoning = request.reasoning
    if reasoning is None or reasoning.enabled is False or reasoning.effort == "none":
        return None
    if (request.tools or request.hosted_tools) and forces_tool(request.tool_choice):
        # Extended thinking cannot be combined with forced tool use; the explicit tool choice wins.
        # https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
        return None
    if reasoning.max_tokens is None and reasoning.effort is None and not reasoning.enabled:
        return None
    budget = reasoning.max_tokens or EFFORT_BUDGET.get(reasoning.effort or "medium", 8192)
    budget = max(MIN_THINKING_BUDGET, min(budget, max_tokens - 1))
    return {"type": "enabled", "budget_tokens": budget}


def build_body(request: CanonicalRequest) -> dict[str, Any]:
    request = allowed_tools_applied(request)  # no allowed-tools form here: the tools filtered, auto or any
    system, messages = system_and_messages(request)
    text_format = request.text_format or {}
    if text_format.get("type") == "json_object":  # no JSON mode on this API: asked for in the system prompt
        system.append({"type": "text", "text": JSON_INSTRUCTION})
    if request.cache_control:
        _apply_automatic_cache(system, messages, request.cache_control)
    max_tokens = request.max_output_tokens or DEFAULT_MAX_TOKENS
    thinking = _thinking(request, max_tokens)
    if thinking and max_tokens <= MIN_THINKING_BUDGET:
        max_tokens = MIN_THINKING_BUDGET + max_tokens
    body = {
        "model": request.model,
        "max_tokens": max_tokens,
        "system": system or None,
        "messages": messages,
        # With extended thinking, temperature and top_k must stay unset ...
        "temperature": None if thinking else request.temperature,
        # ... and top_p only between 0.95 and 1.
        "top_p": request.top_p if not thinking or (request.top_p or 1) >= 0.95 else None,
        "top_k": None if thinking else request.top_k,
        "thinking": thinking,
        "metadata": {"user_id": request.safety_identifier} if request.safety_identifier else None,
        "stop_sequences": list(request.stop) or None,  # no seed or logprobs on this API
        # Anthropic's tiers: "auto" (its default: priority capacity when the organisation has it) or
        # "standard_only", which is the canonical "default" (sent only to endpoints whose catalog entry lists it).
        "service_tier": "standard_only" if request.service_tier == "default" else None,
        "stream": True if request.stream else None,
    }
    if text_format.get("type") == "json_schema":
        body["output_config"] = {"format": {"type": "json_schema", "schema": text_format.get("schema") or {}}}
    if request.tools:
        body["tools"] = [
            drop_none(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters or {"type": "object", "properties": {}},
                    "strict": tool.strict,
                    "cache_control": tool.cache_control,
                }
            )
            for tool in request.tools
        ]
        body["tool_choice"] = _tool_choice(request.tool_choice, request.parallel_tool_calls)
    if request.hosted_tools:  # Anthropic's own web search (the only hosted tool its adapter passes on)
        declared = body.get("tools")
        declared = declared if isinstance(declared, list) else []
        body["tools"] = [*declared, *web_search.tools_body(request.hosted_tools)]
        body["tool_choice"] = web_search.tool_choice(
            request.tool_choice, request.parallel_tool_calls, body.get("tool_choice")
        )
    return drop_none(body)
