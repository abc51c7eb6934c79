"""Canonical stream events -> Responses SSE events, in the reference's order, each with a monotonic
`sequence_number`: created, in_progress, then per output item added / part added / deltas / done, then
completed (or incomplete, or failed). It writes the steps of routing.accumulate's fold (the one fold of a
stream's events), so what the client is sent and what is billed are built by the same code."""

import json
from collections.abc import Iterable
from dataclasses import replace

from responses_api.render import function_call_item, message_item, new_id, reasoning_item
from routing.accumulate import Annotated, Delta, FoldStep, ItemDone, ItemOpened, PartDone, PartOpened, replay
from routing.canonical import CanonicalResponse, OutputFunctionCall, OutputHostedTool, OutputMessage, OutputReasoning
from routing.providers.logprobs import token_dicts
from routing.stages import ServerToolItem, ToolEvent

KEEPALIVE = b": GATEWAY PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"
_encode = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=...) without a new encoder
_TEXT_DELTA = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":'


def sse_bytes(event: dict) -> bytes:
    return f"event: {event['type']}\ndata: {_encode(event)}\n\n".encode()


class StreamRenderer:
    def __init__(self) -> None:
        self.sequence = 0
        self.items: list[dict] = []  # the closed items as rendered, for the final response
        self._ids: dict[int, str] = {}  # output index -> item id
        self._text_fields: dict[tuple[str, int, int], bytes] = {}  # an output_text part's delta fields before the text
        self.content_started = False

    def event(self, kind: str, **fields) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse_bytes(payload)

    # ---- lifecycle ----
    def lifecycle(self, kind: str, response: dict) -> bytes:
        return self.event(kind, response=response)

    def lifecycles(self, kinds: tuple[str, ...], response: dict) -> bytes:
        """Several lifecycle events of the same response (created, in_progress), the response encoded once."""
        encoded = _encode(response)
        out = []
        for kind in kinds:
            head = f'{{"type":{_encode(kind)},"sequence_number":{self.sequence},"response":'
            out.append(f"event: {kind}\ndata: {head}{encoded}}}\n\n".encode())
            self.sequence += 1
        return b"".join(out)

    def error(self, *, code: str, message: str) -> bytes:
        return self.event("error", code=code, message=message, param=None)

    def debug(self, upstream_body: dict) -> bytes:
        return self.event("response.debug", debug={"echo_upstream_body": upstream_body})

    # ---- content ----
    def render(self, steps: Iterable[FoldStep]) -> bytes:
        """The Responses events for the fold's steps, as one write."""
        return b"".join([self._step(step) for step in steps])

    def replay(self, response: CanonicalResponse) -> bytes:
        """A complete response's events, as one write: its items in order, a server tool call the gateway ran as
        its item added, its progress events (a web search's in_progress, searching, completed) and item done."""
        if not any(isinstance(item, ServerToolItem) for item in response.output):
            return self.render(replay(response))
        out = []
        for index, item in enumerate(response.output):
            if isinstance(item, ServerToolItem):
                out.append(self._server_tool(index, item))
                continue
            steps = replay(replace(response, output=(item,)))
            out.append(self.render(replace(step, index=step.index + index) for step in steps))
        return b"".join(out)

    def _server_tool(self, index: int, tool: ServerToolItem) -> bytes:
        added = {**tool.item, "status": "in_progress"}
        progress = (ToolEvent("progress", index, added, event) for event in tool.progress)
        events = (ToolEvent("added", index, added), *progress, ToolEvent("done", index, tool.item))
        return b"".join(self.tool_event(event) for event in events)

    def tool_event(self, event: ToolEvent) -> bytes:
        """A server tool call's event as it runs (the live server-tool loop): its item added, one of its progress
        events (`response.web_search_call.searching`, `response.fusion_call.panel.completed`, ...), its item done."""
        self.content_started = True
        if event.phase == "added":
            return self.event("response.output_item.added", output_index=event.index, item=event.item)
        if event.phase == "done":
            self.items.append(event.item)
            return self.event("response.output_item.done", output_index=event.index, item=event.item)
        assert event.event is not None
        fields = {name: value for name, value in event.event.items() if name != "type"}
        return self.event(event.event["type"], item_id=event.item["id"], output_index=event.index, **fields)

    def _step(self, step: FoldStep) -> bytes:
        match step:
            case ItemOpened():
                return self._opened(step)
            case PartOpened():
                return self._part_opened(step)
            case Delta():
                return self._delta(step)
            case Annotated():  # a citation as it arrives (the part's done event and the item carry it too)
                return self.event(
                    "response.output_text.annotation.added",
                    **self._ids_of(step.index),
                    content_index=step.part_index,
                    annotation_index=step.annotation_index,
                    annotation=step.annotation,
                )
            case PartDone():
                return self._part_done(step)
            case ItemDone(item=OutputHostedTool() as hosted):  # a call the provider ran: as a server tool call's
                progress = tuple({"type": kind} for kind in hosted.progress)
                return self._server_tool(step.index, ServerToolItem(item=hosted.item, progress=progress))
            case ItemDone():
                return self._done(step)

    def _ids_of(self, index: int) -> dict:
        return {"item_id": self._ids[index], "output_index": index}

    def _opened(self, step: ItemOpened) -> bytes:
        self.content_started = True
        item: dict
        match step.item:
            case OutputMessage():
                item_id = self._ids[step.index] = new_id("msg")
                item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
            case OutputReasoning():
                item_id = self._ids[step.index] = new_id("rs")
                item = {"type": "reasoning", "id": item_id, "status": "in_progress", "summary": [], "content": []}
            case OutputFunctionCall():
                item_id = self._ids[step.index] = new_id("fc")
                item = function_call_item(item_id, step.item, "in_progress")
        return self.event("response.output_item.added", output_index=step.index, item=item)

    def _part_opened(self, step: PartOpened) -> bytes:
        ids = self._ids_of(step.index)
        if step.part == "summary_text":
            part = {"type": "summary_text", "text": ""}
            return self.event("response.reasoning_summary_part.added", **ids, summary_index=0, part=part)
        parts = {
            "reasoning_text": {"type": "reasoning_text", "text": ""},
            "output_text": {"type": "output_text", "text": "", "annotations": []},
            "refusal": {"type": "refusal", "refusal": ""},
        }
        return self.event("response.content_part.added", **ids, content_index=step.part_index, part=parts[step.part])

    def _text_delta(self, step: Delta) -> bytes:
        """An output_text delta without logprobs (nearly every event of a stream): the bytes `event` writes for
        it, its constant fields encoded once per part."""
        item_id = self._ids[step.index]
        key = (item_id, step.index, step.part_index)
        fields = self._text_fields.get(key)
        if fields is None:
            ids = f'"item_id":{_encode(item_id)},"output_index":{_encode(step.index)}'
            fields = self._text_fields[key] = f',{ids},"content_index":{_encode(step.part_index)},"delta":'.encode()
        sequence = self.sequence
        self.sequence += 1
        text = _encode(step.text).encode()
        return b"".join((_TEXT_DELTA, str(sequence).encode(), fields, text, b',"logprobs":[]}\n\n'))

    def _delta(self, step: Delta) -> bytes:
        if step.part == "output_text" and not step.logprobs:
            return self._text_delta(step)
        ids = self._ids_of(step.index)
        match step.part:
            case "summary_text":
                return self.event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=step.text)
            case "reasoning_text":
                return self.event("response.reasoning_text.delta", **ids, content_index=0, delta=step.text)
            case "output_text":
                return self.event(
                    "response.output_text.delta",
                    **ids,
                    content_index=step.part_index,
                    delta=step.text,
                    logprobs=token_dicts(step.logprobs),
                )
            case "refusal":
                return self.event("response.refusal.delta", **ids, content_index=step.part_index, delta=step.text)
            case "arguments":
                return self.event("response.function_call_arguments.delta", **ids, delta=step.text)

    def _part_done(self, step: PartDone) -> bytes:
        ids, text = self._ids_of(step.index), step.text
        match step.part:
            case "summary_text":
                return self.event(
                    "response.reasoning_summary_text.done", **ids, summary_index=0, text=text
                ) + self.event(
                    "response.reasoning_summary_part.done",
                    **ids,
                    summary_index=0,
                    part={"type": "summary_text", "text": text},
                )
            case "reasoning_text":
                return self.event("response.reasoning_text.done", **ids, content_index=0, text=text) + self.event(
                    "response.content_part.done", **ids, content_index=0, part={"type": "reasoning_text", "text": text}
                )
            case "refusal":
                return self.event(
                    "response.refusal.done", **ids, content_index=step.part_index, refusal=text
                ) + self.event(
                    "response.content_part.done",
                    **ids,
                    content_index=step.part_index,
                    part={"type": "refusal", "refusal": text},
                )
            case "output_text":
                logprobs = token_dicts(step.logprobs)
                part = {"type": "output_text", "text": text, "annotations": list(step.annotations)}
                if logprobs:  # the part as the answer has it, its tokens when they were asked for
                    part["logprobs"] = logprobs
                return self.event(
                    "response.output_text.done", **ids, content_index=step.part_index, text=text, logprobs=logprobs
                ) + self.event("response.content_part.done", **ids, content_index=step.part_index, part=part)

    def _done(self, step: ItemDone) -> bytes:
        item_id = self._ids[step.index]
        prefix = b""
        match step.item:
            case OutputMessage():
                item = message_item(item_id, step.item)
            case OutputReasoning():
                item = reasoning_item(item_id, step.item)
            case OutputFunctionCall():
                prefix = self.event(
                    "response.function_call_arguments.done",
                    **self._ids_of(step.index),
                    name=step.item.name,
                    arguments=step.item.arguments,
                )
                item = function_call_item(item_id, step.item)
        self.items.append(item)
        return prefix + self.event("response.output_item.done", output_index=step.index, item=item)
