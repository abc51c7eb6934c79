"""The answer in the Chat Completions shape: a `chat.completion` object from the Responses result, and
`chat.completion.chunk` SSE events from the Responses event stream (https://platform.openai.com/docs/api-reference/chat)."""

import json
import time

# The HTTP status an error type stands for (the API's ApiErrorType table), for in-band errors' integer `code`.
ERROR_STATUS = {
    "invalid_request": 400,
    "context_length_exceeded": 400,
    "content_policy_violation": 400,
    "authentication": 401,
    "payment_required": 402,
    "permission_denied": 403,
    "not_found": 404,
    "payload_too_large": 413,
    "unprocessable": 422,
    "rate_limit_exceeded": 429,
    "provider_unavailable": 502,
    "provider_overloaded": 503,
    "timeout": 504,
}
INCOMPLETE_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def completion_id(generation_id: str) -> str:
    return generation_id  # "gen-...": the id GET /generation takes


def finish_reason(result: dict, *, tool_calls: bool) -> str:
    if result["status"] == "incomplete":
        reason = (result.get("incomplete_details") or {}).get("reason") or ""
        return INCOMPLETE_FINISH.get(reason, "length")
    return "tool_calls" if tool_calls else "stop"


def usage(block: dict | None) -> dict | None:
    """The Responses usage block as Chat Completions usage (cost and is_byok kept)."""
    if block is None:
        return None
    return {
        "prompt_tokens": block["input_tokens"],
        "completion_tokens": block["output_tokens"],
        "total_tokens": block["total_tokens"],
        "prompt_tokens_details": {
            "cached_tokens": block["input_tokens_details"]["cached_tokens"],
            "cache_write_tokens": block["input_tokens_details"].get("cache_write_tokens", 0),
        },
        "completion_tokens_details": {"reasoning_tokens": block["output_tokens_details"]["reasoning_tokens"]},
        "cost": block["cost"],
        "is_byok": block["is_byok"],
        "cost_details": block.get("cost_details"),
    }


def message(output: list[dict]) -> dict:
    """The assistant message of a result's output items."""
    texts: list[str] = []
    refusals, reasoning, calls, citations = [], [], [], []
    for item in output:
        if item["type"] == "message":
            for part in item["content"]:
                if part["type"] == "output_text":  # url_citations (web plugin) in the chat shape, indices in `content`
                    shift = sum(len(text) for text in texts)
                    citations += [
                        {"type": "url_citation", "url_citation": {**{k: v for k, v in a.items() if k != "type"},
                         "start_index": a["start_index"] + shift, "end_index": a["end_index"] + shift}}
                        for a in part.get("annotations") or () if a.get("type") == "url_citation"
                    ]  # fmt: skip
                    texts.append(part["text"])
            refusals += [part["refusal"] for part in item["content"] if part["type"] == "refusal"]
        elif item["type"] == "reasoning":
            reasoning += [part["text"] for part in item["summary"] + item["content"]]
        elif item["type"] == "function_call":
            calls.append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]},
                }
            )
    out: dict = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": "".join(refusals) or None,
        "reasoning": "".join(reasoning) or None,
        "annotations": citations,
    }
    if calls:
        out["tool_calls"] = calls
    return out


def logprobs(output: list[dict]) -> dict:
    """The answer's token logprobs in the Chat Completions shape (`choices[].logprobs`)."""
    content = [
        token
        for item in output
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
        for token in part.get("logprobs") or ()
    ]
    return {"content": content, "refusal": None}


def completion(result: dict, *, generation_id: str, with_logprobs: bool = False) -> dict:
    """A Responses result as a `chat.completion` (`with_logprobs`: the request asked for logprobs)."""
    answer = message(result["output"])
    body = {
        "id": completion_id(generation_id),
        "object": "chat.completion",
        "created": result["created_at"],
        "model": result["model"],
        "choices": [
            {
                "index": 0,
                "message": answer,
                "finish_reason": finish_reason(result, tool_calls="tool_calls" in answer),
                "logprobs": logprobs(result["output"]) if with_logprobs else None,
            }
        ],
        "service_tier": result.get("service_tier"),
        "system_fingerprint": None,
        "usage": usage(result.get("usage")),
    }
    if result.get("metadata") is not None:
        body["metadata"] = result["metadata"]  # echoed, as /responses does: nothing is stored
    if "gateway_metadata" in result:
        body["gateway_metadata"] = result["gateway_metadata"]
    return body


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class ChunkTranslator:
    """Responses events -> `chat.completion.chunk` events (responses_api.streaming relays the stream)."""

    def __init__(self, *, generation_id: str, model: str, include_usage: bool, with_logprobs: bool = False) -> None:
        self.id = completion_id(generation_id)
        self.model = model
        self.created = int(time.time())
        self.include_usage = include_usage
        self.with_logprobs = with_logprobs
        self.calls: dict[str, int] = {}  # function call item id -> tool call index
        self.finished = False

    def chunk(
        self, delta: dict | None, *, finish_reason: str | None = None, tokens: list | None = None, **extra
    ) -> bytes:
        """One chunk; `tokens`: a content delta's token logprobs (as `choices[].logprobs` when asked for)."""
        choice: dict = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        if self.with_logprobs:
            choice["logprobs"] = {"content": tokens, "refusal": None} if tokens is not None else None
        choices = [] if delta is None else [choice]
        payload = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }
        return _sse(payload)

    def event(self, event: dict) -> bytes:
        kind = event["type"]
        if kind == "response.created":
            self.created = event["response"]["created_at"]
            return self.chunk({"role": "assistant", "content": ""})
        if kind == "response.output_text.delta":
            return self.chunk({"content": event["delta"]}, tokens=event.get("logprobs") or [])
        if kind == "response.refusal.delta":
            return self.chunk({"refusal": event["delta"]})
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            return self.chunk({"reasoning": event["delta"]})
        if kind == "response.output_item.added" and event["item"]["type"] == "function_call":
            item = event["item"]
            index = self.calls[item["id"]] = len(self.calls)
            call = {"name": item["name"], "arguments": item["arguments"]}
            return self.chunk(
                {"tool_calls": [{"index": index, "id": item["call_id"], "type": "function", "function": call}]}
            )
        if kind == "response.function_call_arguments.delta":
            index = self.calls[event["item_id"]]
            return self.chunk({"tool_calls": [{"index": index, "function": {"arguments": event["delta"]}}]})
        if kind in ("response.completed", "response.incomplete"):
            return self._finished(event["response"])
        if kind == "response.failed":
            return self._failed(event["response"])
        if kind == "response.debug":
            return self.chunk(None, debug=event["debug"])
        return b""

    def _finished(self, result: dict) -> bytes:
        self.model = result["model"]
        extra = {"gateway_metadata": result["gateway_metadata"]} if "gateway_metadata" in result else {}
        reason = finish_reason(result, tool_calls=bool(self.calls))
        citations = message(result["output"])["annotations"]  # the web plugin's, known once the answer is whole
        delta = {"annotations": citations} if citations else {}
        out = self.chunk(delta, finish_reason=reason, **({} if self.include_usage else extra))
        if self.include_usage:
            out += self.chunk(None, usage=usage(result.get("usage")), **extra)
        return out

    def _failed(self, result: dict) -> bytes:
        """The reference's mid-stream error chunk: a top-level `error` (integer code), finish_reason "error"."""
        error_type = result.get("error_type") or "server"
        metadata = {"error_type": error_type}
        if result.get("provider_code"):
            metadata["provider_code"] = result["provider_code"]
        error = {"code": ERROR_STATUS.get(error_type, 500), "message": result["error"]["message"], "metadata": metadata}
        extra = {"gateway_metadata": result["gateway_metadata"]} if "gateway_metadata" in result else {}
        if result.get("provider"):
            extra["provider"] = result["provider"]
        return self.chunk({"content": ""}, finish_reason="error", error=error, **extra)

    def done(self) -> bytes:
        return b"data: [DONE]\n\n"
