"""Canonical request -> OpenAI Chat Completions body.
https://platform.openai.com/docs/api-reference/chat/create"""

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
from routing.providers.base import allowed_tools_applied, drop_none, reasoning_effort
from routing.providers.openai_chat import web_search


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": part.url, "detail": part.detail}}
    if isinstance(part, FilePart):
        if part.file_id:
            return {"type": "file", "file": {"file_id": part.file_id}}
        return {
            "type": "file",
            "file": drop_none({"filename": part.filename, "file_data": part.file_data or part.file_url}),
        }
    raise TypeError(type(part))


def _content(parts: tuple[Part, ...]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_part(part) for part in parts]


def _text_only(parts: tuple[Part, ...]) -> str:
    return "".join(part.text for part in parts if isinstance(part, TextPart))


def messages(request: CanonicalRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for item in request.input:
        if isinstance(item, Message):
            if item.role == "assistant":
                out.append({"role": "assistant", "content": _text_only(item.content)})
            else:
                # "developer" is OpenAI-only; "system" is understood by every compatible server.
                role = "system" if item.role == "developer" else item.role
                out.append({"role": role, "content": _content(item.content)})
        elif isinstance(item, FunctionCall):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            previous = out[-1] if out else None
            if previous and previous["role"] == "assistant":
                previous.setdefault("tool_calls", []).append(call)
                if previous["content"] == "":
                    previous["content"] = None
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif isinstance(item, FunctionCallOutput):
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
        elif isinstance(item, Reasoning):
            continue  # Chat Completions has no way to replay reasoning
    return out


def tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    """Chat Completions' tool_choice: auto|none|required or {type: function, function: {name}}. A provider-run tool
    chosen by type can only be web search here (planning routes no other to this wire), which a search model runs
    on every call without being chosen: the function tools beside it stay at auto."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice if isinstance(choice, str) else None


def response_format(text_format: dict[str, Any] | None) -> dict[str, Any] | None:
    if not text_format or text_format.get("type") == "text":
        return None
    if text_format["type"] == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": drop_none(
                {
                    "name": text_format.get("name", "response"),
                    "schema": text_format.get("schema"),
                    "strict": text_format.get("strict"),
                    "description": text_format.get("description"),
                }
            ),
        }
    return {"type": "json_object"}


def sampling(request: CanonicalRequest) -> dict[str, Any]:
    """Stop sequences, seed and logprobs: `stop` (up to 4 on OpenAI), `seed`, `logprobs` with `top_logprobs`."""
    body: dict[str, Any] = {"stop": list(request.stop) or None, "seed": request.seed}
    if request.logprobs:
        body.update(logprobs=True, top_logprobs=request.top_logprobs)
    return drop_none(body)


def build_body(request: CanonicalRequest) -> dict[str, Any]:
    # allowed_tools as a filtered tool list with auto or required: OpenAI's own {type: allowed_tools,
    # allowed_tools: {...}} is refused or ignored by most of the providers that speak this wire, a shorter list is not.
    request = allowed_tools_applied(request)
    body = {
        "model": request.model,
        "messages": messages(request),
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "frequency_penalty": request.frequency_penalty,
        "presence_penalty": request.presence_penalty,
        "max_tokens": request.max_output_tokens,
        "response_format": response_format(request.text_format),
        "verbosity": request.verbosity,
        "reasoning_effort": reasoning_effort(request.reasoning),
        "user": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
        "service_tier": request.service_tier if request.service_tier not in (None, "auto") else None,
    }
    body.update(sampling(request))
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": drop_none(
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters or {"type": "object", "properties": {}},
                        "strict": tool.strict,
                    }
                ),
            }
            for tool in request.tools
        ]
        body["tool_choice"] = tool_choice(request.tool_choice)
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.hosted_tools:  # a search model's own web search (the only hosted tool this adapter passes on)
        body["web_search_options"] = web_search.options(request.hosted_tools)
    if request.stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return drop_none(body)
