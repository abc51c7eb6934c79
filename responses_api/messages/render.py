"""The answer in the Anthropic Messages shape: a `message` object from the Responses result, Anthropic's SSE event
stream from the Responses event stream (https://docs.anthropic.com/en/api/messages, /en/api/messages-streaming);
Anthropic's error body is gateway.anthropic_errors.anthropic_error_body."""

import json

from routing.providers.base import arguments_object

# Canonical error types of a failure after the first byte, as Anthropic's.
STREAM_ERROR_TYPES = {
    "rate_limit_exceeded": "rate_limit_error",
    "provider_overloaded": "overloaded_error",
    "timeout": "timeout_error",
    "invalid_request": "invalid_request_error",
    "context_length_exceeded": "invalid_request_error",
    "content_policy_violation": "invalid_request_error",
    "permission_denied": "permission_error",
}
INCOMPLETE_STOP = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


def stop_sequence(result: dict) -> str | None:
    """The request's stop sequence that ended the answer, when the upstream named it (responses_api.render keeps
    it on the message item)."""
    found = [
        item["stop_sequence"] for item in result["output"] if item["type"] == "message" and "stop_sequence" in item
    ]
    return found[-1] if found else None


def stop_reason(result: dict, *, tool_use: bool) -> str:
    if result["status"] == "incomplete":
        reason = (result.get("incomplete_details") or {}).get("reason") or ""
        return INCOMPLETE_STOP.get(reason, "max_tokens")
    if tool_use:
        return "tool_use"
    return "stop_sequence" if stop_sequence(result) is not None else "end_turn"


def usage(block: dict | None) -> dict:
    """Anthropic counts input tokens read from or written to the cache apart from `input_tokens`."""
    if block is None:
        return {"input_tokens": 0, "output_tokens": 0}
    cached = block["input_tokens_details"]["cached_tokens"]
    written = block["input_tokens_details"].get("cache_write_tokens", 0)
    return {
        "input_tokens": max(0, block["input_tokens"] - cached - written),
        "output_tokens": block["output_tokens"],
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": written,
        "cost": block["cost"],
        "is_byok": block["is_byok"],
    }


def content_blocks(output: list[dict]) -> list[dict]:
    blocks: list[dict] = []
    for item in output:
        if item["type"] == "reasoning":
            text = "".join(part["text"] for part in item["summary"] + item["content"])
            if item.get("encrypted_content") and not text:
                blocks.append({"type": "redacted_thinking", "data": item["encrypted_content"]})
            else:
                blocks.append({"type": "thinking", "thinking": text, "signature": item.get("signature") or ""})
        elif item["type"] == "message":
            for part in item["content"]:
                text = part.get("text") if part["type"] == "output_text" else part.get("refusal")
                blocks.append({"type": "text", "text": text or ""})
        elif item["type"] == "function_call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": item["call_id"],
                    "name": item["name"],
                    "input": arguments_object(item["arguments"]),
                }
            )
    return blocks


def message(result: dict, *, generation_id: str) -> dict:
    """A Responses result as an Anthropic `message`."""
    blocks = content_blocks(result["output"])
    body = {
        "id": generation_id,
        "type": "message",
        "role": "assistant",
        "model": result["model"],
        "content": blocks,
        "stop_reason": stop_reason(result, tool_use=any(block["type"] == "tool_use" for block in blocks)),
        "stop_sequence": stop_sequence(result),
        "usage": usage(result.get("usage")),
    }
    if "gateway_metadata" in result:
        body["gateway_metadata"] = result["gateway_metadata"]
    return body


def _sse(kind: str, payload: dict) -> bytes:
    return (
        f"event: {kind}\ndata: ".encode()
        + json.dumps({"type": kind, **payload}, separators=(",", ":")).encode()
        + b"\n\n"
    )


PING = _sse("ping", {})


class MessageEventTranslator:
    """Responses events -> Anthropic's stream: message_start, content_block_start/delta/stop per block,
    message_delta (stop reason, usage), message_stop; a failure after the first byte is an `error` event."""

    def __init__(self, *, generation_id: str, model: str) -> None:
        self.id = generation_id
        self.model = model
        self.blocks = 0  # blocks started
        self.open: str | None = None  # the Responses item id (or part key) of the open block
        self.tool_use = False

    def _start(self, key: str, block: dict) -> bytes:
        out = self._stop()
        self.open = key
        out += _sse("content_block_start", {"index": self.blocks, "content_block": block})
        self.blocks += 1
        return out

    def _stop(self) -> bytes:
        if self.open is None:
            return b""
        self.open = None
        return _sse("content_block_stop", {"index": self.blocks - 1})

    def _delta(self, delta: dict) -> bytes:
        return _sse("content_block_delta", {"index": self.blocks - 1, "delta": delta})

    def event(self, event: dict) -> bytes:
        kind = event["type"]
        if kind == "response.created":
            start: dict = {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            return _sse("message_start", {"message": start}) + PING
        if kind == "response.output_item.added":
            return self._item_added(event)
        if kind == "response.content_part.added" and event["part"]["type"] in ("output_text", "refusal"):
            key = f"{event['item_id']}:{event['content_index']}"
            return self._start(key, {"type": "text", "text": ""})
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return self._delta({"type": "text_delta", "text": event["delta"]})
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            return self._delta({"type": "thinking_delta", "thinking": event["delta"]})
        if kind == "response.function_call_arguments.delta":
            return self._delta({"type": "input_json_delta", "partial_json": event["delta"]})
        if kind == "response.output_item.done":
            return self._item_done(event["item"])
        if kind in ("response.completed", "response.incomplete"):
            return self._finished(event["response"])
        if kind == "response.failed":
            return self._failed(event["response"])
        return b""

    def _item_added(self, event: dict) -> bytes:
        item = event["item"]
        if item["type"] == "reasoning":
            return self._start(item["id"], {"type": "thinking", "thinking": "", "signature": ""})
        if item["type"] == "function_call":
            self.tool_use = True
            return self._start(
                item["id"], {"type": "tool_use", "id": item["call_id"], "name": item["name"], "input": {}}
            )
        return b""

    def _item_done(self, item: dict) -> bytes:
        out = b""
        if item["type"] == "reasoning" and item.get("signature") and self.open == item["id"]:
            out = self._delta({"type": "signature_delta", "signature": item["signature"]})
        return out + self._stop()

    def _finished(self, result: dict) -> bytes:
        payload: dict = {
            "delta": {
                "stop_reason": stop_reason(result, tool_use=self.tool_use),
                "stop_sequence": stop_sequence(result),
            },
            "usage": usage(result.get("usage")),
        }
        if "gateway_metadata" in result:
            payload["gateway_metadata"] = result["gateway_metadata"]
        return self._stop() + _sse("message_delta", payload) + _sse("message_stop", {})

    def _failed(self, result: dict) -> bytes:
        error_type = STREAM_ERROR_TYPES.get(result.get("error_type") or "", "api_error")
        return self._stop() + _sse("error", {"error": {"type": error_type, "message": result["error"]["message"]}})

    def done(self) -> bytes:
        return b""  # Anthropic's stream ends with message_stop (or error), no [DONE]
