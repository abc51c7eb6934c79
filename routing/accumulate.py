"""Fold canonical stream events into the canonical response they add up to."""

from collections.abc import Iterable

from routing.canonical import (
    CanonicalResponse,
    Finished,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    ResponseStarted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
    UsageReported,
)


class Accumulator:
    """Keeps the output so far; `response()` is valid at any point (e.g. after a cut stream)."""

    def __init__(self) -> None:
        self.upstream_id: str | None = None
        self.model: str | None = None
        self.reasoning_summary: list[str] = []
        self.reasoning_content: list[str] = []
        self.reasoning_sealed: ReasoningSealed | None = None
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, list] = {}  # index -> [call_id, name, [argument fragments]]
        self.usage = Usage()
        self.finished: Finished | None = None

    def add(self, event: StreamEvent) -> None:
        match event:
            case ResponseStarted():
                self.upstream_id = event.upstream_id or self.upstream_id
                self.model = event.model or self.model
            case TextDelta():
                self.text.append(event.text)
            case RefusalDelta():
                self.refusal.append(event.text)
            case ReasoningDelta():
                (self.reasoning_summary if event.kind == "summary" else self.reasoning_content).append(event.text)
            case ReasoningSealed():
                self.reasoning_sealed = event
            case ToolCallStarted():
                self.calls[event.index] = [event.call_id, event.name, []]
            case ToolCallDelta():
                self.calls.setdefault(event.index, [f"call_{event.index}", "", []])[2].append(event.arguments)
            case UsageReported():
                self.usage = event.usage
            case Finished():
                self.finished = event

    def has_output(self) -> bool:
        return bool(
            self.text
            or self.refusal
            or self.calls
            or self.reasoning_summary
            or self.reasoning_content
            or self.reasoning_sealed
        )

    def response(self) -> CanonicalResponse:
        output: list[OutputItem] = []
        if self.reasoning_summary or self.reasoning_content or self.reasoning_sealed:
            sealed = self.reasoning_sealed or ReasoningSealed()
            output.append(
                OutputReasoning(
                    summary=("".join(self.reasoning_summary),) if self.reasoning_summary else (),
                    content=("".join(self.reasoning_content),) if self.reasoning_content else (),
                    signature=sealed.signature,
                    encrypted_content=sealed.encrypted_content,
                    format=sealed.format,
                )
            )
        if self.text or self.refusal:
            output.append(OutputMessage(text="".join(self.text), refusal="".join(self.refusal) or None))
        for index in sorted(self.calls):
            call_id, name, fragments = self.calls[index]
            output.append(OutputFunctionCall(call_id=call_id, name=name, arguments="".join(fragments)))
        finished = self.finished or Finished()
        return CanonicalResponse(
            output=tuple(output),
            usage=self.usage,
            status=finished.status,
            incomplete_reason=finished.incomplete_reason,
            upstream_id=self.upstream_id,
            model=self.model,
            service_tier=finished.service_tier,
        )


def accumulate(events: Iterable[StreamEvent]) -> CanonicalResponse:
    accumulator = Accumulator()
    for event in events:
        accumulator.add(event)
    return accumulator.response()
