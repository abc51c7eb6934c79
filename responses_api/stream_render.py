"""Canonical stream events -> Responses SSE events, in the reference's order, each with a monotonic
`sequence_number`: created, in_progress, then per output item added / part added / deltas / done, then
completed (or incomplete, or failed)."""

import json
from typing import Any

from responses_api.render import function_call_item, message_item, new_id, reasoning_item
from routing.canonical import (
    OutputFunctionCall,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
)

KEEPALIVE = b": GATEWAY PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"


def sse_bytes(event: dict) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


class StreamRenderer:
    def __init__(self) -> None:
        self.sequence = 0
        self.items: list[dict] = []
        # The item being streamed, None between items: {"kind", "index", "id", ...state} (Any: its keys vary
        # by kind, and every use is guarded by `_is_open`).
        self.open: Any = None
        self.content_started = False

    def event(self, kind: str, **fields) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse_bytes(payload)

    # ---- lifecycle ----
    def lifecycle(self, kind: str, response: dict) -> bytes:
        return self.event(kind, response=response)

    def error(self, *, code: str, message: str) -> bytes:
        return self.event("error", code=code, message=message, param=None)

    def debug(self, upstream_body: dict) -> bytes:
        return self.event("response.debug", debug={"echo_upstream_body": upstream_body})

    # ---- content ----
    def feed(self, event) -> list[bytes]:
        if isinstance(event, ReasoningDelta):
            return self._reasoning_delta(event)
        if isinstance(event, ReasoningSealed):
            out = [] if self._is_open("reasoning") else self._open_reasoning()
            self.open["signature"] = event.signature or self.open.get("signature")
            self.open["encrypted_content"] = event.encrypted_content or self.open.get("encrypted_content")
            self.open["format"] = event.format
            return out
        if isinstance(event, TextDelta):
            return self._text_delta(event.text, refusal=False)
        if isinstance(event, RefusalDelta):
            return self._text_delta(event.text, refusal=True)
        if isinstance(event, ToolCallStarted):
            out = self.close_open()
            index = len(self.items) + 0
            item = function_call_item(new_id("fc"), OutputFunctionCall(event.call_id, event.name, ""), "in_progress")
            self.open = {
                "kind": "function_call",
                "index": index,
                "id": item["id"],
                "call_id": event.call_id,
                "name": event.name,
                "arguments": [],
                "tool_index": event.index,
            }
            self.content_started = True
            return out + [self.event("response.output_item.added", output_index=index, item=item)]
        if isinstance(event, ToolCallDelta):
            if not self._is_open("function_call"):
                return self.feed(
                    ToolCallStarted(index=event.index, call_id=f"call_{event.index}", name="")
                ) + self.feed(event)
            self.open["arguments"].append(event.arguments)
            return [
                self.event(
                    "response.function_call_arguments.delta",
                    item_id=self.open["id"],
                    output_index=self.open["index"],
                    delta=event.arguments,
                )
            ]
        return []

    def _is_open(self, kind: str) -> bool:
        return self.open is not None and self.open["kind"] == kind

    def _open_reasoning(self) -> list[bytes]:
        out = self.close_open()
        index = len(self.items)
        item_id = new_id("rs")
        self.open = {
            "kind": "reasoning",
            "index": index,
            "id": item_id,
            "summary": None,
            "content": None,
            "signature": None,
            "encrypted_content": None,
            "format": "unknown",
        }
        self.content_started = True
        item = {"type": "reasoning", "id": item_id, "status": "in_progress", "summary": [], "content": []}
        return out + [self.event("response.output_item.added", output_index=index, item=item)]

    def _reasoning_delta(self, event: ReasoningDelta) -> list[bytes]:
        out = [] if self._is_open("reasoning") else self._open_reasoning()
        state, ids = self.open, {"item_id": self.open["id"], "output_index": self.open["index"]}
        if event.kind == "summary":
            if state["summary"] is None:
                state["summary"] = []
                out.append(
                    self.event(
                        "response.reasoning_summary_part.added",
                        **ids,
                        summary_index=0,
                        part={"type": "summary_text", "text": ""},
                    )
                )
            state["summary"].append(event.text)
            out.append(self.event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=event.text))
        else:
            if state["content"] is None:
                state["content"] = []
                out.append(
                    self.event(
                        "response.content_part.added",
                        **ids,
                        content_index=0,
                        part={"type": "reasoning_text", "text": ""},
                    )
                )
            state["content"].append(event.text)
            out.append(self.event("response.reasoning_text.delta", **ids, content_index=0, delta=event.text))
        return out

    def _text_delta(self, text: str, *, refusal: bool) -> list[bytes]:
        out = []
        if not self._is_open("message"):
            out += self.close_open()
            index = len(self.items)
            item_id = new_id("msg")
            self.open = {"kind": "message", "index": index, "id": item_id, "parts": []}
            self.content_started = True
            out.append(
                self.event(
                    "response.output_item.added",
                    output_index=index,
                    item={
                        "type": "message",
                        "id": item_id,
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    },
                )
            )
        state = self.open
        kind = "refusal" if refusal else "output_text"
        if not state["parts"] or state["parts"][-1]["kind"] != kind:
            out += self._close_part()
            state["parts"].append({"kind": kind, "text": []})
            part = (
                {"type": "refusal", "refusal": ""}
                if refusal
                else {"type": "output_text", "text": "", "annotations": []}
            )
            out.append(
                self.event(
                    "response.content_part.added",
                    item_id=state["id"],
                    output_index=state["index"],
                    content_index=len(state["parts"]) - 1,
                    part=part,
                )
            )
        state["parts"][-1]["text"].append(text)
        ids = {"item_id": state["id"], "output_index": state["index"], "content_index": len(state["parts"]) - 1}
        if refusal:
            out.append(self.event("response.refusal.delta", **ids, delta=text))
        else:
            out.append(self.event("response.output_text.delta", **ids, delta=text, logprobs=[]))
        return out

    def _close_part(self) -> list[bytes]:
        state = self.open
        if not state or state["kind"] != "message" or not state["parts"] or state["parts"][-1].get("closed"):
            return []
        part = state["parts"][-1]
        part["closed"] = True
        text = "".join(part["text"])
        ids = {"item_id": state["id"], "output_index": state["index"], "content_index": len(state["parts"]) - 1}
        if part["kind"] == "refusal":
            return [
                self.event("response.refusal.done", **ids, refusal=text),
                self.event("response.content_part.done", **ids, part={"type": "refusal", "refusal": text}),
            ]
        return [
            self.event("response.output_text.done", **ids, text=text, logprobs=[]),
            self.event(
                "response.content_part.done", **ids, part={"type": "output_text", "text": text, "annotations": []}
            ),
        ]

    def close_open(self) -> list[bytes]:
        state = self.open
        if state is None:
            return []
        out: list[bytes] = []
        ids = {"item_id": state["id"], "output_index": state["index"]}
        if state["kind"] == "message":
            out += self._close_part()
            texts = [p for p in state["parts"]]
            text = "".join("".join(p["text"]) for p in texts if p["kind"] == "output_text")
            refusal = "".join("".join(p["text"]) for p in texts if p["kind"] == "refusal") or None
            item = message_item(state["id"], text, refusal)
        elif state["kind"] == "reasoning":
            summary = "".join(state["summary"] or [])
            content = "".join(state["content"] or [])
            if state["summary"] is not None:
                out.append(self.event("response.reasoning_summary_text.done", **ids, summary_index=0, text=summary))
                out.append(
                    self.event(
                        "response.reasoning_summary_part.done",
                        **ids,
                        summary_index=0,
                        part={"type": "summary_text", "text": summary},
                    )
                )
            if state["content"] is not None:
                out.append(self.event("response.reasoning_text.done", **ids, content_index=0, text=content))
                out.append(
                    self.event(
                        "response.content_part.done",
                        **ids,
                        content_index=0,
                        part={"type": "reasoning_text", "text": content},
                    )
                )
            item = reasoning_item(
                state["id"],
                OutputReasoning(
                    summary=(summary,) if state["summary"] is not None else (),
                    content=(content,) if state["content"] is not None else (),
                    signature=state["signature"],
                    encrypted_content=state["encrypted_content"],
                    format=state["format"],
                ),
            )
        else:
            arguments = "".join(state["arguments"])
            out.append(
                self.event("response.function_call_arguments.done", **ids, name=state["name"], arguments=arguments)
            )
            item = function_call_item(state["id"], OutputFunctionCall(state["call_id"], state["name"], arguments))
        self.items.append(item)
        out.append(self.event("response.output_item.done", output_index=state["index"], item=item))
        self.open = None
        return out
