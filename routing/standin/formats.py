"""The OpenAI wire formats as the stand-in speaks them (Chat Completions, Responses): bodies, stream events and
error bodies, shaped like the real providers', and the plan every format follows (Anthropic and Bedrock:
formats_anthropic.py)."""

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    model: str
    text: str
    reasoning: str
    tool_name: str
    tool_arguments: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    finish: str  # stop | length
    chunks: int
    stop_sequence: str | None = None  # the request's stop sequence that cut `text`
    logprobs: bool = False  # the request asked for token logprobs (the OpenAI formats)
    top_logprobs: int = 0
    stop_field: bool = False  # Converse: the request asked for additionalModelResponseFields /stop_sequence
    parallel: int = 1  # function calls in the answer (the chat, Responses and Anthropic formats)
    signature: str = ""  # the reasoning's signature / encrypted content ("": each format's stand-in value)
    hosted_flood: str = ""  # text spread over extra provider-run items (routing.standin.hosted)


def calls(plan: Plan) -> list[tuple[int, str]]:
    """The answer's function calls as (number from 1, arguments): one, or `parallel` with distinct arguments."""
    if not plan.tool_name:
        return []
    if plan.parallel == 1:
        return [(1, plan.tool_arguments)]
    base = json.loads(plan.tool_arguments or "{}")
    return [(n, json.dumps({**base, "call": n})) for n in range(1, plan.parallel + 1)]


TOKEN = re.compile(r"\s*\S+|\s+")


def split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def token_logprobs(text: str, top: int) -> list[dict[str, Any]]:
    """The text's tokens (words with their leading space) with deterministic log probabilities, each with `top`
    alternatives (the token itself first), in OpenAI's shape."""

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    out = []
    for token in TOKEN.findall(text):
        logprob = -round((hashlib.sha256(token.encode()).digest()[0] + 1) / 512, 4)
        alternatives = [entry(token, logprob)] + [entry(f"{token}~{n}", round(logprob - n, 4)) for n in range(1, top)]
        out.append({**entry(token, logprob), "top_logprobs": alternatives[:top]})
    return out


def text_pieces(plan: Plan) -> list[tuple[str, list[dict[str, Any]]]]:
    """The streamed text deltas with their tokens' logprobs: whole tokens per delta when logprobs were asked for."""
    if not plan.logprobs:
        return [(piece, []) for piece in split(plan.text, plan.chunks)]
    tokens = token_logprobs(plan.text, plan.top_logprobs)
    size = -(-len(tokens) // max(1, min(plan.chunks, len(tokens) or 1)))
    groups = [tokens[i : i + size] for i in range(0, len(tokens), size)]
    return [("".join(token["token"] for token in group), group) for group in groups]


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


# ---- OpenAI Chat Completions -------------------------------------------------------------------

OPENAI_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    408: ("server_error", None, "Request timed out."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request."),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def openai_error(status: int) -> dict[str, Any]:
    error_type, code, message = OPENAI_ERRORS.get(status, ("server_error", None, "Upstream error."))
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _chat_usage(plan: Plan) -> dict[str, Any]:
    return {
        "prompt_tokens": plan.input_tokens,
        "completion_tokens": plan.output_tokens,
        "total_tokens": plan.input_tokens + plan.output_tokens,
        "prompt_tokens_details": {"cached_tokens": plan.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": plan.reasoning_tokens},
    }


def _chat_finish(plan: Plan) -> str:
    return "tool_calls" if plan.tool_name else ("length" if plan.finish == "length" else "stop")


def _chat_logprobs(plan: Plan, tokens: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    if not plan.logprobs:
        return None
    content = token_logprobs(plan.text, plan.top_logprobs) if tokens is None else tokens
    return {"content": content, "refusal": None}


def chat_body(plan: Plan) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": plan.text or None, "refusal": None}
    if plan.reasoning:
        message["reasoning_content"] = plan.reasoning
    if plan.tool_name:
        message["tool_calls"] = [
            {
                "id": f"call_standin_{n}",
                "type": "function",
                "function": {"name": plan.tool_name, "arguments": arguments},
            }
            for n, arguments in calls(plan)
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": plan.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": _chat_finish(plan), "logprobs": _chat_logprobs(plan)}
        ],
        "usage": _chat_usage(plan),
    }


def chat_stream(plan: Plan) -> tuple[list[bytes], bytes]:
    """(chunks, terminal): the terminal part is left out when a stream is cut."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": plan.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: dict[str, Any] | None = None) -> bytes:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": piece}) for piece in split(plan.reasoning, plan.chunks)]
    out += [chunk({"content": piece}, logprobs=_chat_logprobs(plan, tokens)) for piece, tokens in text_pieces(plan)]
    for n, arguments in calls(plan):
        start = {"index": n - 1, "id": f"call_standin_{n}", "type": "function"}
        out.append(chunk({"tool_calls": [{**start, "function": {"name": plan.tool_name, "arguments": ""}}]}))
        out += [
            chunk({"tool_calls": [{"index": n - 1, "function": {"arguments": piece}}]}) for piece in split(arguments, 2)
        ]
    terminal = chunk({}, _chat_finish(plan)) + sse({**base, "choices": [], "usage": _chat_usage(plan)}) + sse("[DONE]")
    return out, terminal


def chat_stream_error(status: int) -> bytes:
    return sse(openai_error(status))


# ---- OpenAI Responses --------------------------------------------------------------------------


def _responses_usage(plan: Plan) -> dict[str, Any]:
    return {
        "input_tokens": plan.input_tokens,
        "input_tokens_details": {"cached_tokens": plan.cached_tokens},
        "output_tokens": plan.output_tokens,
        "output_tokens_details": {"reasoning_tokens": plan.reasoning_tokens},
        "total_tokens": plan.input_tokens + plan.output_tokens,
    }


def _output_text(plan: Plan) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": plan.text, "annotations": []}
    if plan.logprobs:
        part["logprobs"] = token_logprobs(plan.text, plan.top_logprobs)
    return part


def _delta_logprobs(tokens: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Logprobs as a delta event carries them (no bytes)."""

    def bare(entry: dict[str, Any]) -> dict[str, Any]:
        return {"token": entry["token"], "logprob": entry["logprob"]}

    return [{**bare(token), "top_logprobs": [bare(top) for top in token["top_logprobs"]]} for token in tokens]


def _responses_items(plan: Plan) -> list[dict[str, Any]]:
    items = []
    if plan.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": "rs_standin_1",
                "summary": [{"type": "summary_text", "text": plan.reasoning}],
                "encrypted_content": plan.signature or "standin-encrypted-reasoning",
            }
        )
    if plan.text:
        items.append(
            {
                "type": "message",
                "id": "msg_standin_1",
                "role": "assistant",
                "status": "completed",
                "content": [_output_text(plan)],
            }
        )
    items += [
        {
            "type": "function_call",
            "id": f"fc_standin_{n}",
            "call_id": f"call_standin_{n}",
            "name": plan.tool_name,
            "arguments": arguments,
            "status": "completed",
        }
        for n, arguments in calls(plan)
    ]
    return items


def responses_body(plan: Plan, response_id: str | None = None) -> dict[str, Any]:
    incomplete = plan.finish == "length"
    return {
        "id": response_id or f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "model": plan.model,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": _responses_items(plan),
        "usage": _responses_usage(plan),
        "error": None,
    }


def responses_stream(plan: Plan) -> tuple[list[bytes], bytes]:
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    seq = iter(range(10_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    shell = {**responses_body(plan, response_id), "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=shell)]
    index = 0
    if plan.reasoning:
        out.append(
            event(
                "response.output_item.added",
                output_index=index,
                item={"type": "reasoning", "id": "rs_standin_1", "summary": []},
            )
        )
        out += [
            event(
                "response.reasoning_summary_text.delta",
                item_id="rs_standin_1",
                output_index=index,
                summary_index=0,
                delta=piece,
            )
            for piece in split(plan.reasoning, plan.chunks)
        ]
        out.append(event("response.output_item.done", output_index=index, item=_responses_items(plan)[0]))
        index += 1
    if plan.text:
        out.append(
            event(
                "response.output_item.added",
                output_index=index,
                item={
                    "type": "message",
                    "id": "msg_standin_1",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                },
            )
        )
        out += [
            event(
                "response.output_text.delta",
                item_id="msg_standin_1",
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=_delta_logprobs(tokens),
            )
            for piece, tokens in text_pieces(plan)
        ]
        index += 1
    for n, arguments in calls(plan):
        item = {
            "type": "function_call",
            "id": f"fc_standin_{n}",
            "call_id": f"call_standin_{n}",
            "name": plan.tool_name,
            "arguments": "",
            "status": "in_progress",
        }
        out.append(event("response.output_item.added", output_index=index, item=item))
        out += [
            event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece)
            for piece in split(arguments, 2)
        ]
        index += 1
    final = responses_body(plan, response_id)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    return out, event(kind, response=final)


def responses_stream_error(status: int) -> bytes:
    error = openai_error(status)["error"]
    return sse(
        {
            "type": "error",
            "code": error["code"] or error["type"],
            "message": error["message"],
            "param": None,
            "sequence_number": 9999,
        },
        event="error",
    )


# ---- Anthropic Messages ------------------------------------------------------------------------
