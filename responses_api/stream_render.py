"""Canonical stream events -> Responses SSE events, in the reference's order, each with a monotonic
`sequence_number`: created, in_progress, then per output item added / part added / deltas / done, then
completed (or incomplete, or failed). It writes the steps of routing.accumulate's fold (the one fold of a
stream's events), so what the client is sent and what is billed are built by the same code. The events are dicts:
each front door frames or translates them (responses_api.streaming)."""

from collections.abc import Iterable, Sequence
from dataclasses import replace

from responses_api.render import ResultShell, failure_error, function_call_item, message_item, new_id, reasoning_item
from routing.accumulate import Annotated, Delta, FoldStep, ItemDone, ItemOpened, PartDone, PartOpened, replay
from routing.canonical import CanonicalResponse, OutputFunctionCall, OutputHostedTool, OutputMessage, OutputReasoning
from routing.providers.logprobs import token_dicts
from routing.stages import ServerToolItem, ToolEvent


class Marker:
    """A point in the stream that is not an event: a keep-alive, or the end ([DONE] on the Responses stream)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


KEEPALIVE = Marker("keepalive")
DONE = Marker("done")
Write = Sequence[dict | Marker]  # what goes out together, as one write
KEEPALIVE_WRITE: Write = (KEEPALIVE,)
DONE_WRITE: Write = (DONE,)


class StreamRenderer:
    def __init__(self) -> None:
        self.sequence = 0
        self.items: list[dict] = []  # the closed items as rendered, for the final response
        self._ids: dict[int, str] = {}  # output index -> item id
        self.content_started = False

    def event(self, kind: str, **fields) -> dict:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return payload

    # ---- lifecycle ----
    def lifecycle(self, kind: str, response: dict) -> dict:
        return self.event(kind, response=response)

    def lifecycles(self, kinds: tuple[str, ...], response: dict) -> list[dict]:
        """Several lifecycle events of the same response (created, in_progress): the framing encodes it once."""
        return [self.event(kind, response=response) for kind in kinds]

    def error(self, *, code: str, message: str) -> dict:
        return self.event("error", code=code, message=message, param=None)

    def debug(self, upstream_body: dict) -> dict:
        return self.event("response.debug", debug={"echo_upstream_body": upstream_body})

    def failure(
        self,
        shell: ResultShell,
        *,
        error_type: str,
        message: str,
        model: str,
        metadata: dict | None,
        provider: str | None = None,
        provider_code: str | None = None,
    ) -> list[dict]:
        """A stream that failed after its 200 went out: `error` then `response.failed`; the provider that failed
        and its own error code (not for a server error) ride along for the front doors that show them (the Chat
        Completions error chunk)."""
        body = failure_error(error_type, message)
        failed = shell.render(
            status="failed", model=model, output=self.items, error=body, error_type=error_type, metadata=metadata
        )
        if provider:
            failed["provider"] = provider
        if provider_code:
            failed["provider_code"] = provider_code
        return [self.error(code=body["code"], message=body["message"]), self.lifecycle("response.failed", failed)]

    # ---- content ----
    def render(self, steps: Iterable[FoldStep]) -> list[dict]:
        """The Responses events for the fold's steps, as one write."""
        out: list[dict] = []
        for step in steps:
            if type(step) is Delta and step.part == "output_text" and not step.logprobs:
                out.append(self._text_delta(step))  # most steps
                continue
            events = self._step(step)
            if type(events) is dict:
                out.append(events)
            else:
                out += events
        return out

    def replay(self, response: CanonicalResponse) -> list[dict]:
        """A complete response's events, as one write: its items in order, a server tool call the gateway ran as
        its item added, its progress events (a web search's in_progress, searching, completed) and item done."""
        if not any(isinstance(item, ServerToolItem) for item in response.output):
            return self.render(replay(response))
        out: list[dict] = []
        for index, item in enumerate(response.output):
            if isinstance(item, ServerToolItem):
                out += self._server_tool(index, item)
                continue
            steps = replay(replace(response, output=(item,)))
            out += self.render(replace(step, index=step.index + index) for step in steps)
        return out

    def _server_tool(self, index: int, tool: ServerToolItem) -> list[dict]:
        added = {**tool.item, "status": "in_progress"}
        progress = (ToolEvent("progress", index, added, event) for event in tool.progress)
        events = (ToolEvent("added", index, added), *progress, ToolEvent("done", index, tool.item))
        return [self.tool_event(event) for event in events]

    def tool_event(self, event: ToolEvent) -> dict:
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

    def _step(self, step: FoldStep) -> dict | list[dict]:
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

    def _opened(self, step: ItemOpened) -> dict:
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

    def _part_opened(self, step: PartOpened) -> dict:
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

    def _text_delta(self, step: Delta) -> dict:
        """An output_text delta without logprobs (nearly every event of a stream): the event `event` makes, built
        directly (the framing writes it from its constant fields: responses_api.streaming)."""
        sequence = self.sequence
        self.sequence += 1
        return {
            "type": "response.output_text.delta",
            "sequence_number": sequence,
            "item_id": self._ids[step.index],
            "output_index": step.index,
            "content_index": step.part_index,
            "delta": step.text,
            "logprobs": [],
        }

    def _delta(self, step: Delta) -> dict:
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

    def _part_done(self, step: PartDone) -> list[dict]:
        ids, text = self._ids_of(step.index), step.text
        match step.part:
            case "summary_text":
                return [
                    self.event("response.reasoning_summary_text.done", **ids, summary_index=0, text=text),
                    self.event(
                        "response.reasoning_summary_part.done",
                        **ids,
                        summary_index=0,
                        part={"type": "summary_text", "text": text},
                    ),
                ]
            case "reasoning_text":
                return [
                    self.event("response.reasoning_text.done", **ids, content_index=0, text=text),
                    self.event(
                        "response.content_part.done",
                        **ids,
                        content_index=0,
                        part={"type": "reasoning_text", "text": text},
                    ),
                ]
            case "refusal":
                return [
                    self.event("response.refusal.done", **ids, content_index=step.part_index, refusal=text),
                    self.event(
                        "response.content_part.done",
                        **ids,
                        content_index=step.part_index,
                        part={"type": "refusal", "refusal": text},
                    ),
                ]
            case "output_text":
                logprobs = token_dicts(step.logprobs)
                part = {"type": "output_text", "text": text, "annotations": list(step.annotations)}
                if logprobs:  # the part as the answer has it, its tokens when they were asked for
                    part["logprobs"] = logprobs
                return [
                    self.event(
                        "response.output_text.done", **ids, content_index=step.part_index, text=text, logprobs=logprobs
                    ),
                    self.event("response.content_part.done", **ids, content_index=step.part_index, part=part),
                ]

    def _done(self, step: ItemDone) -> list[dict]:
        item_id = self._ids[step.index]
        out: list[dict] = []
        match step.item:
            case OutputMessage():
                item = message_item(item_id, step.item)
            case OutputReasoning():
                item = reasoning_item(item_id, step.item)
            case OutputFunctionCall():
                out.append(
                    self.event(
                        "response.function_call_arguments.done",
                        **self._ids_of(step.index),
                        name=step.item.name,
                        arguments=step.item.arguments,
                    )
                )
                item = function_call_item(item_id, step.item)
        self.items.append(item)
        out.append(self.event("response.output_item.done", output_index=step.index, item=item))
        return out
