"""Canonical request -> OpenAI Responses body (stateless: store is false, reasoning travels encrypted).
https://platform.openai.com/docs/api-reference/responses/create"""

from typing import Any

from routing.canonical import (
    CanonicalRequest,
    FilePart,
    FunctionCall,
    FunctionCallOutput,
    HostedTool,
    ImagePart,
    Item,
    Message,
    Part,
    Reasoning,
    TextPart,
)
from routing.providers.base import drop_none, reasoning_effort
from routing.providers.hosted import capability
from routing.providers.openai_responses import hosted

FORMAT = "openai-responses-v1"
LOGPROBS = "message.output_text.logprobs"


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": part.url, "detail": part.detail}
    if isinstance(part, FilePart):
        return drop_none(
            {
                "type": "input_file",
                "filename": part.filename,
                "file_data": part.file_data,
                "file_url": part.file_url,
                "file_id": part.file_id,
            }
        )
    raise TypeError(type(part))


def _item(item: Item) -> dict[str, Any] | None:
    if isinstance(item, Message):
        if item.role == "assistant":
            text = "".join(p.text for p in item.content if isinstance(p, TextPart))
            return {"type": "message", "role": "assistant", "content": text}
        return {"type": "message", "role": item.role, "content": [_part(part) for part in item.content]}
    if isinstance(item, FunctionCall):
        return {"type": "function_call", "call_id": item.call_id, "name": item.name, "arguments": item.arguments}
    if isinstance(item, FunctionCallOutput):
        return {"type": "function_call_output", "call_id": item.call_id, "output": item.output}
    if isinstance(item, Reasoning):
        if item.format != FORMAT or not item.encrypted_content:
            return None  # another provider's reasoning cannot be replayed here
        return drop_none(
            {
                "type": "reasoning",
                "id": item.id,
                "encrypted_content": item.encrypted_content,
                "summary": [{"type": "summary_text", "text": text} for text in item.summary],
            }
        )
    raise TypeError(type(item))


def logprobs(request: CanonicalRequest, include: list[str]) -> dict[str, Any]:
    """Token logprobs: `include` message.output_text.logprobs, with `top_logprobs` alternatives. The Responses API
    has no stop sequences or seed (routing sends those to other endpoints: ProviderAdapter.parameters)."""
    if not request.logprobs:
        return {}
    return drop_none({"include": [*include, LOGPROBS], "top_logprobs": request.top_logprobs})


def _as_declared(choice: object, tools: tuple[HostedTool, ...]) -> object:
    """A provider-run tool chosen by type, spelt as the request's tool is (web_search_preview chosen, web_search
    declared: OpenAI finds no such tool), in an allowed_tools list too."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "allowed_tools":
        return {**choice, "tools": [_as_declared(reference, tools) for reference in choice.get("tools") or ()]}
    runs = capability(str(choice.get("type")))
    declared = next(
        (tool.spec["type"] for tool in tools if runs and capability(str(tool.spec.get("type"))) == runs), None
    )
    return {**choice, "type": declared} if declared else choice


def build_body(request: CanonicalRequest) -> dict[str, Any]:
    text = drop_none({"format": request.text_format, "verbosity": request.verbosity})
    reasoning = None
    if request.reasoning and request.reasoning.enabled is not False:
        effort = reasoning_effort(request.reasoning)
        reasoning = drop_none({"effort": effort, "summary": request.reasoning.summary}) or None
    body: dict[str, Any] = {
        "model": request.model,
        "input": [item for item in map(_item, request.input) if item is not None],
        "instructions": request.instructions,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_output_tokens": request.max_output_tokens,
        "text": text or None,
        "reasoning": reasoning,
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
        "service_tier": request.service_tier if request.service_tier not in (None, "auto") else None,
        "store": False,
        "stream": True if request.stream else None,
    }
    if reasoning is not None:
        body["include"] = ["reasoning.encrypted_content"]
    body.update(logprobs(request, body.get("include") or []))
    if request.tools:
        body["tools"] = [
            drop_none(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters or {"type": "object", "properties": {}},
                    "strict": tool.strict,
                }
            )
            for tool in request.tools
        ]
        body["tool_choice"] = request.tool_choice
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.hosted_tools:  # the tools OpenAI runs itself, as the caller gave them
        body["tools"] = body.get("tools", []) + hosted.tools_body(request.hosted_tools)
        body["tool_choice"] = _as_declared(request.tool_choice, request.hosted_tools)  # auto, required, or by type
        body["max_tool_calls"] = hosted.max_tool_calls(request.hosted_tools)  # the searches the hold covers
        if more := hosted.include(request.hosted_tools):
            body["include"] = [*(body.get("include") or []), *more]
    return drop_none(body)
