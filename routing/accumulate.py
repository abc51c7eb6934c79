"""The one fold of canonical stream events. `Fold.add` turns each event into the steps that build the
answer's items in the order they arrive (an item opened, a part opened, a delta, a part done, an item done);
the SSE renderer (responses_api.stream_render) writes those steps as Responses events, and `response()` is the
canonical response they add up to, valid at any point (a cut stream is billed from it)."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from routing.canonical import (
    CanonicalResponse,
    Finished,
    HostedToolCall,
    OutputFunctionCall,
    OutputHostedTool,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    ResponseStarted,
    StreamEvent,
    TextAnnotated,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)
from routing.providers.hosted import citation_within

# A message's parts are output_text and refusal; a reasoning item's are one summary_text and one reasoning_text.
PartKind = Literal["output_text", "refusal", "summary_text", "reasoning_text"]


@dataclass(frozen=True, slots=True)
class ItemOpened:
    index: int  # the item's output index
    item: OutputItem  # as it starts: empty (a function call: its call id and name)


@dataclass(frozen=True, slots=True)
class PartOpened:
    index: int
    part: PartKind
    part_index: int


@dataclass(frozen=True, slots=True)
class Delta:
    index: int
    part: PartKind | Literal["arguments"]
    part_index: int
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()  # an output_text delta's tokens, when asked for


@dataclass(frozen=True, slots=True)
class PartDone:
    index: int
    part: PartKind
    part_index: int
    text: str
    annotations: tuple[dict[str, Any], ...] = ()  # the first output_text part of a message: the message's annotations
    logprobs: tuple[TokenLogprob, ...] = ()  # an output_text part's tokens, when asked for


@dataclass(frozen=True, slots=True)
class Annotated:
    """An annotation added to a message's first output_text part while it is open (a citation as it arrives)."""

    index: int
    part_index: int
    annotation_index: int
    annotation: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ItemDone:
    index: int
    item: OutputItem  # complete


FoldStep = ItemOpened | PartOpened | Delta | Annotated | PartDone | ItemDone


@dataclass(slots=True)
class _Part:
    kind: PartKind
    texts: list[str] = field(default_factory=list)
    done: bool = False
    logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass(slots=True)
class _OpenItem:
    """The item being built: a message (parts), reasoning (summary and/or content part, seal) or a call."""

    index: int
    kind: Literal["message", "reasoning", "function_call"]
    parts: list[_Part] = field(default_factory=list)  # a message's parts, in order
    summary: _Part | None = None
    content: _Part | None = None
    signature: str | None = None
    encrypted_content: str | None = None
    format: str = "unknown"
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    annotations: tuple[dict[str, Any], ...] = ()  # a message's (set by replay: a post-stage's file annotations)
    stop_sequence: str | None = None  # a message's (set when the stream finished on one)

    def item(self) -> OutputItem:
        if self.kind == "message":
            text = "".join("".join(part.texts) for part in self.parts if part.kind == "output_text")
            refusal = "".join("".join(part.texts) for part in self.parts if part.kind == "refusal")
            logprobs = tuple(token for part in self.parts if part.kind == "output_text" for token in part.logprobs)
            return OutputMessage(
                text=text,
                refusal=refusal or None,
                annotations=self.annotations,
                logprobs=logprobs,
                stop_sequence=self.stop_sequence,
            )
        if self.kind == "reasoning":
            return OutputReasoning(
                summary=("".join(self.summary.texts),) if self.summary else (),
                content=("".join(self.content.texts),) if self.content else (),
                signature=self.signature,
                encrypted_content=self.encrypted_content,
                format=self.format,
            )
        return OutputFunctionCall(call_id=self.call_id, name=self.name, arguments="".join(self.arguments))


class Fold:
    """The answer so far: its closed items, the open one, and what the stream said about itself."""

    def __init__(self) -> None:
        self.items: list[OutputItem] = []  # closed, in output order
        self.open: _OpenItem | None = None
        self.upstream_id: str | None = None
        self.model: str | None = None
        self.usage = Usage()
        self.finished: Finished | None = None
        self.cut = False  # ended by the gateway at the request's output bound (routing.output_bound)

    def add(self, event: StreamEvent) -> list[FoldStep]:
        match event:
            case TextDelta():
                return self._text("output_text", event.text, event.logprobs)
            case RefusalDelta():
                return self._text("refusal", event.text)
            case ReasoningDelta():
                return self._reasoning(event)
            case ReasoningSealed():
                steps = self._open_as("reasoning")
                assert self.open is not None
                self.open.signature = event.signature or self.open.signature
                self.open.encrypted_content = event.encrypted_content or self.open.encrypted_content
                self.open.format = event.format
                return steps
            case ToolCallStarted():
                steps = self.close()
                self.open = _OpenItem(
                    index=len(self.items), kind="function_call", call_id=event.call_id, name=event.name
                )
                return [*steps, ItemOpened(self.open.index, self.open.item())]
            case ToolCallDelta():
                steps = []
                if self.open is None or self.open.kind != "function_call":  # arguments with no start
                    steps = self.add(ToolCallStarted(index=event.index, call_id=f"call_{event.index}", name=""))
                assert self.open is not None
                self.open.arguments.append(event.arguments)
                return [*steps, Delta(self.open.index, "arguments", 0, event.arguments)]
            case HostedToolCall():  # a call the provider ran: one closed item of its own
                steps = self.close()
                self.items.append(event.call)
                return [*steps, ItemDone(len(self.items) - 1, event.call)]
            case TextAnnotated():
                return self._annotated(event.annotation)
            case ResponseStarted():
                self.upstream_id = event.upstream_id or self.upstream_id
                self.model = event.model or self.model
            case UsageReported():
                self.usage = event.usage
            case Finished():
                self.finished = event
                if event.stop_sequence and self.open is not None and self.open.kind == "message":
                    self.open.stop_sequence = event.stop_sequence
        return []

    def _open_as(self, kind: Literal["message", "reasoning"]) -> list[FoldStep]:
        if self.open is not None and self.open.kind == kind:
            return []
        steps = self.close()
        self.open = _OpenItem(index=len(self.items), kind=kind)
        return [*steps, ItemOpened(self.open.index, self.open.item())]

    def _text(self, kind: PartKind, text: str, logprobs: tuple[TokenLogprob, ...] = ()) -> list[FoldStep]:
        steps = self._open_as("message")
        item = self.open
        assert item is not None
        if not item.parts or item.parts[-1].kind != kind:
            steps += self._close_part()
            item.parts.append(_Part(kind))
            steps.append(PartOpened(item.index, kind, len(item.parts) - 1))
        item.parts[-1].texts.append(text)
        item.parts[-1].logprobs += logprobs
        return [*steps, Delta(item.index, kind, len(item.parts) - 1, text, logprobs)]

    def _annotated(self, annotation: dict[str, Any]) -> list[FoldStep]:
        """The message's annotation, on its first output_text part (opened when no text came yet): announced
        while that part is open (closed already: it is on the message item only)."""
        steps = self._open_as("message")
        item = self.open
        assert item is not None
        written = sum(len("".join(part.texts)) for part in item.parts if part.kind == "output_text")
        if not citation_within(annotation, written):  # a citation comes after its text: beyond it, none to make
            return steps
        first = next((n for n, part in enumerate(item.parts) if part.kind == "output_text"), None)
        if first is None:
            steps += self._close_part()
            item.parts.append(_Part("output_text"))
            first = len(item.parts) - 1
            steps.append(PartOpened(item.index, "output_text", first))
        item.annotations += (annotation,)
        if item.parts[first].done:
            return steps
        return [*steps, Annotated(item.index, first, len(item.annotations) - 1, annotation)]

    def _reasoning(self, event: ReasoningDelta) -> list[FoldStep]:
        steps = self._open_as("reasoning")
        item = self.open
        assert item is not None
        kind: PartKind = "summary_text" if event.kind == "summary" else "reasoning_text"
        part = item.summary if event.kind == "summary" else item.content
        if part is None:
            part = _Part(kind)
            if event.kind == "summary":
                item.summary = part
            else:
                item.content = part
            steps.append(PartOpened(item.index, kind, 0))
        part.texts.append(event.text)
        return [*steps, Delta(item.index, kind, 0, event.text)]

    def _close_part(self) -> list[FoldStep]:
        item = self.open
        if item is None or item.kind != "message" or not item.parts or item.parts[-1].done:
            return []
        part = item.parts[-1]
        part.done = True
        first_text = part.kind == "output_text" and part is next(p for p in item.parts if p.kind == "output_text")
        annotations = item.annotations if first_text else ()
        done = PartDone(
            item.index, part.kind, len(item.parts) - 1, "".join(part.texts), annotations, tuple(part.logprobs)
        )
        return [done]

    def close(self) -> list[FoldStep]:
        """Close the open item (the stream ended, or another item begins)."""
        item = self.open
        if item is None:
            return []
        steps = self._close_part()
        for part in (item.summary, item.content):
            if part is not None:
                steps.append(PartDone(item.index, part.kind, 0, "".join(part.texts)))
        done = item.item()
        self.items.append(done)
        self.open = None
        return [*steps, ItemDone(item.index, done)]

    def has_output(self) -> bool:
        return bool(self.items) or self.open is not None

    def response(self) -> CanonicalResponse:
        output = tuple(self.items) + ((self.open.item(),) if self.open is not None else ())
        finished = self.finished or Finished()
        return CanonicalResponse(
            output=output,
            usage=self.usage,
            status=finished.status,
            incomplete_reason=finished.incomplete_reason,
            upstream_id=self.upstream_id,
            model=self.model,
            service_tier=finished.service_tier,
            output_cut=self.cut,
        )


def accumulate(events: Iterable[StreamEvent]) -> CanonicalResponse:
    fold = Fold()
    for event in events:
        fold.add(event)
    return fold.response()


def replay(response: CanonicalResponse) -> list[FoldStep]:
    """The steps that build a complete response's items, each item its own (a response a post-stage changed,
    then streamed)."""
    fold = Fold()
    steps: list[FoldStep] = []
    for index, item in enumerate(response.output):
        steps += fold.close()
        for event in _item_events(index, item):
            steps += fold.add(event)
        if isinstance(item, OutputMessage) and fold.open is not None:
            for annotation in item.annotations:  # each announced after the text, as a provider's citations are
                steps += fold.add(TextAnnotated(annotation))
            fold.open.stop_sequence = item.stop_sequence
    return steps + fold.close()


def _item_events(index: int, item: OutputItem) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    match item:
        case OutputMessage():
            if item.text or not item.refusal:
                events.append(TextDelta(item.text, item.logprobs))
            if item.refusal:
                events.append(RefusalDelta(item.refusal))
        case OutputReasoning():
            events += [ReasoningDelta(text, kind="summary") for text in item.summary]
            events += [ReasoningDelta(text, kind="content") for text in item.content]
            events.append(ReasoningSealed(item.signature, item.encrypted_content, item.format))
        case OutputFunctionCall():
            events += [ToolCallStarted(index, item.call_id, item.name), ToolCallDelta(index, item.arguments)]
        case OutputHostedTool():
            events.append(HostedToolCall(item))
    return events
