"""Canonical request -> Bedrock Converse body.
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html"""

import json
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
from routing.errors import UpstreamError
from routing.providers.anthropic.request import EFFORT_BUDGET, MIN_THINKING_BUDGET
from routing.providers.base import (
    JSON_INSTRUCTION,
    allowed_tools_applied,
    arguments_object,
    drop_none,
    forces_tool,
    merge_turn,
)

FORMAT = "bedrock-anthropic-v1"
STOP_SEQUENCE_PATH = "/stop_sequence"  # a JSON Pointer into the model's own response
DATA_URL = re.compile(r"^data:(?P<media>[\w/+.-]+);base64,(?P<data>.+)$", re.DOTALL)
CACHE_POINT = {"cachePoint": {"type": "default"}}  # Converse's prompt-cache breakpoint (Claude models)
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


def _inline(url: str, what: str) -> tuple[str, str]:
    match = DATA_URL.match(url or "")
    if not match:
        # Converse takes inline bytes (or S3), not web URLs: another endpoint may serve this request.
        raise UpstreamError(
            error_type="invalid_request", retryable=True, message=f"Bedrock needs the {what} inline (a data: URL)"
        )
    return match["media"], match["data"]


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if isinstance(part, ImagePart):
        media, data = _inline(part.url, "image")
        return {"image": {"format": IMAGE_FORMATS.get(media, "png"), "source": {"bytes": data}}}
    if isinstance(part, FilePart):
        media, data = _inline(part.file_data or part.file_url or "", "document")
        name = re.sub(r"[^A-Za-z0-9 ()\[\]-]", "-", (part.filename or "document").rsplit(".", 1)[0])[:200]
        return {"document": {"format": media.rsplit("/", 1)[-1], "name": name or "document", "source": {"bytes": data}}}
    raise TypeError(type(part))


def _cached(block: dict[str, Any], cache_control: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The block, and a cache point after it when it carries a breakpoint (Converse's prompt caching)."""
    return [block, CACHE_POINT] if cache_control else [block]


def system_and_messages(request: CanonicalRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system = [{"text": request.instructions}] if request.instructions else []
    messages: list[dict[str, Any]] = []
    for item in request.input:
        if isinstance(item, Message):
            blocks = [block for part in item.content for block in _cached(_block(part), part.cache_control)]
            if item.role in ("system", "developer"):
                system.extend(block for block in blocks if "text" in block or "cachePoint" in block)
            else:
                merge_turn(messages, item.role, blocks)
        elif isinstance(item, FunctionCall):
            merge_turn(
                messages,
                "assistant",
                _cached(
                    {
                        "toolUse": {
                            "toolUseId": item.call_id,
                            "name": item.name,
                            "input": arguments_object(item.arguments),
                        }
                    },
                    item.cache_control,
                ),
            )
        elif isinstance(item, FunctionCallOutput):
            result = {"toolResult": {"toolUseId": item.call_id, "content": [{"text": item.output}]}}
            merge_turn(messages, "user", _cached(result, item.cache_control))
        elif isinstance(item, Reasoning) and item.format == FORMAT and item.signature:
            merge_turn(
                messages,
                "assistant",
                [
                    {
                        "reasoningContent": {
                            "reasoningText": {
                                "text": "".join(item.content or item.summary),
                                "signature": item.signature,
                            }
                        }
                    }
                ],
            )
    return system, messages


def _tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """Converse's toolChoice: {auto}, {any} or {tool: {name}} (none: no toolConfig at all). No provider-run tool
    runs on this wire, so planning routes no choice of one here."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"tool": {"name": choice["name"]}}
    return {"required": {"any": {}}, "auto": {"auto": {}}}.get(choice) if isinstance(choice, str) else None


def build_body(request: CanonicalRequest) -> dict[str, Any]:
    request = allowed_tools_applied(request)  # no allowed-tools form here: the tools filtered, auto or any
    system, messages = system_and_messages(request)
    if (request.text_format or {}).get("type") == "json_object":  # Converse has no JSON mode: asked for in words
        system.append({"text": JSON_INSTRUCTION})
    if request.cache_control and messages and messages[-1]["content"][-1] != CACHE_POINT:
        messages[-1]["content"].append(CACHE_POINT)  # the request's automatic breakpoint: the prompt's end
    inference = drop_none(
        {
            "maxTokens": request.max_output_tokens,
            "temperature": request.temperature,
            "topP": request.top_p,
            "stopSequences": list(request.stop) or None,  # Converse has no seed or logprobs
        }
    )
    extra: dict[str, Any] = {}
    reasoning = request.reasoning
    thinking_allowed = not (request.tools and forces_tool(request.tool_choice))  # as on Anthropic's own API
    if (
        thinking_allowed
        and reasoning
        and reasoning.enabled is not False
        and reasoning.effort != "none"
        and (reasoning.effort or reasoning.max_tokens or reasoning.enabled)
    ):
        budget = max(MIN_THINKING_BUDGET, reasoning.max_tokens or EFFORT_BUDGET[reasoning.effort or "medium"])
        extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
        inference.pop("temperature", None)
        if inference.get("topP", 1) < 0.95:
            inference.pop("topP")
        if inference.get("maxTokens", 0) <= budget:
            inference["maxTokens"] = budget + (request.max_output_tokens or 4096)
    elif request.top_k is not None:
        extra["top_k"] = request.top_k
    body = {
        "messages": messages,
        "system": system or None,
        "inferenceConfig": inference or None,
        "additionalModelRequestFields": extra or None,
        # Which stop sequence ended the answer: returned by models that report it (Claude), ignored by the rest.
        "additionalModelResponseFieldPaths": [STOP_SEQUENCE_PATH] if request.stop else None,
    }
    if request.tools and request.tool_choice != "none":
        body["toolConfig"] = drop_none(
            {
                "tools": [
                    block
                    for tool in request.tools
                    for block in _cached(
                        {
                            "toolSpec": drop_none(
                                {
                                    "name": tool.name,
                                    "description": tool.description,
                                    "inputSchema": {"json": tool.parameters or {"type": "object"}},
                                }
                            )
                        },
                        tool.cache_control,
                    )
                ],
                "toolChoice": _tool_choice(request.tool_choice),
            }
        )
    return drop_none(body)


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
