"""The server-tool loop: the gateway runs the server tools of a request (`{"type": "gateway:<tool>"}`, alias
`openrouter:<tool>`) that it declared to the model as functions (`gateway_<tool>`: routing.stages.SERVER_FUNCTIONS),
and calls the model again with the results, until it answers without calling one. The request's own loop is the
server_tools plugin's stage (plugins.server_tools.stage); the same loop (`Loop`, blocking) runs a fusion panel
member with its tools, so it lives here, beside the tools' registry (plugins.common.tools), for both.

The loop ends when the model answers without server-tool calls, when it calls a caller's function tool (returned to
the caller as usual; server calls made beside it are not run), or when `max_tool_calls` calls ran or a
`stop_server_tools_when` condition holds: then the model is called once more without the server tools, so that it
answers. The calls ran are output items of their own types (`gateway:datetime`, ...), after the round's own items;
`gateway_metadata.pipeline` has a `server_tools` entry with the calls per tool (and a tool's own entry: a
`gateway:fusion` call's panel, analysis and cost).

On a stream (`live`) the loop runs while it is relayed: each round's text and items as they arrive from upstream
(the server-tool calls left out), each call's item added, its progress events and its item done as it runs, then
the next round, streamed too.
"""

import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any, TypeVar, cast

from gateway.errors import GatewayError
from plugins.common.tools import RUNNERS, ToolContext, ToolResult, new_item_id, pending_fields, run_tool
from routing.accumulate import FoldStep, ItemDone, ItemOpened
from routing.attempts import WAITING, AttemptStream, Served, _Waiting
from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    Item,
    Message,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    Reasoning,
    TextPart,
    Usage,
)
from routing.catalog import EndpointInfo
from routing.errors import STATUS_ERROR_TYPES, ErrorType
from routing.pricing import usage_cost
from routing.stages import (
    Block,
    LoopEvent,
    RequestContext,
    Restaged,
    ServerToolItem,
    StageEntry,
    ToolEvent,
    ToolLoop,
)


class Refused(Exception):
    """The caller's guardrails refused what a server tool would hand the model (ToolLoop.scan): the loop ends and
    the request is refused with the guardrail's Block (a JSON answer), or fails in band (a stream)."""

    def __init__(self, block: Block):
        super().__init__(block.message)
        self.block = block


T = TypeVar("T")
MAX_TOOL_CALLS = 30  # the spec's default and maximum of `max_tool_calls` (stop conditions stop it sooner)


def kind_of(tool: dict[str, Any]) -> str:
    """A tool's server tool type: openrouter:<tool> is an alias of gateway:<tool>."""
    return tool["type"].replace("openrouter:", "gateway:", 1)


def function_name(kind: str) -> str:
    """gateway:web_search -> gateway_web_search (as responses_api.validation.tools.server_function_name)."""
    return kind.replace(":", "_", 1)


def usage_sum(usages: Iterable[Usage]) -> Usage:
    """Every count of the usages added up."""
    total = Usage()
    for usage in usages:
        total = Usage(**{f.name: getattr(total, f.name) + getattr(usage, f.name) for f in fields(Usage)})
    return total


@dataclass
class LoopState:
    """What the loop did so far: calls per tool, rounds, tokens and list-price cost of every round."""

    calls: dict[str, int] = field(default_factory=dict)
    rounds: int = 1
    tokens: int = 0
    cost: Decimal = Decimal(0)
    usage: Usage = field(default_factory=Usage)  # every round's
    called: set[str] = field(default_factory=set)  # function names called (has_tool_call)
    tool_ms: float = 0.0  # time spent running the tools themselves

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def count(self, usage: Usage, endpoint: EndpointInfo | None) -> None:
        self.tokens += usage.input_tokens + usage.output_tokens
        self.usage = usage_sum((self.usage, usage))
        if endpoint is not None:
            self.cost += usage_cost(endpoint=endpoint, usage=usage)


def finish_reason(response: CanonicalResponse) -> str:
    if response.status == "incomplete":
        return "length" if response.incomplete_reason == "max_output_tokens" else response.incomplete_reason or ""
    return "tool_calls" if any(isinstance(item, OutputFunctionCall) for item in response.output) else "stop"


def stop_condition(conditions: list[dict[str, Any]], state: LoopState, response: CanonicalResponse) -> str:
    """The first `stop_server_tools_when` condition that holds (OR), as the summary says it; "" when none."""
    for condition in conditions:
        kind = condition.get("type")
        if kind == "step_count_is" and state.rounds - 1 >= condition["step_count"]:
            return f"step_count_is {condition['step_count']}"
        name = str(condition.get("tool_name") or "").replace("openrouter:", "gateway:", 1)
        if kind == "has_tool_call" and function_name(name) in state.called:
            return f"has_tool_call {condition['tool_name']}"
        if kind == "max_tokens_used" and state.tokens >= condition["max_tokens"]:
            return f"max_tokens_used {condition['max_tokens']}"
        if kind == "max_cost" and state.cost >= Decimal(str(condition["max_cost_in_dollars"])):
            return f"max_cost {condition['max_cost_in_dollars']}"
        if kind == "finish_reason_is" and finish_reason(response) == condition["reason"]:
            return f"finish_reason_is {condition['reason']}"
    return ""


def as_input(output: Iterable[OutputItem]) -> list[Item]:
    """A round's output items as the next round's input (the model's own turn)."""
    items: list[Item] = []
    for item in output:
        if isinstance(item, OutputMessage) and (item.text or item.refusal):
            items.append(Message(role="assistant", content=(TextPart(text=item.text or item.refusal or ""),)))
        elif isinstance(item, OutputReasoning):
            items.append(
                Reasoning(
                    summary=item.summary,
                    content=item.content,
                    signature=item.signature,
                    encrypted_content=item.encrypted_content,
                    format=item.format,
                )
            )
        elif isinstance(item, OutputFunctionCall):
            items.append(FunctionCall(call_id=item.call_id, name=item.name, arguments=item.arguments))
    return items


def drain(run: Generator[object, None, T]) -> T:
    """A generator run to its end, what it yielded dropped (the loop on the JSON path, a fusion run)."""
    while True:
        try:
            next(run)
        except StopIteration as stop:
            return stop.value


class Relay:
    """Output indices over the whole answer: a streamed round's items (its server-tool calls left out) and the
    calls the gateway ran, in the order the client sees them."""

    def __init__(self, kinds: dict[str, dict[str, Any]]):
        self.kinds = kinds
        self.next = 0
        self.mapped: dict[int, int] = {}  # the round's fold index -> output index

    def steps(self, steps: Iterable[FoldStep]) -> list[FoldStep]:
        out: list[FoldStep] = []
        for step in steps:
            opens = isinstance(step, ItemOpened) or (isinstance(step, ItemDone) and step.index not in self.mapped)
            if opens:  # an item opened, or one that arrives whole (a call the provider ran)
                assert isinstance(step, ItemOpened | ItemDone)
                self.mapped.pop(step.index, None)
                if not (isinstance(step.item, OutputFunctionCall) and step.item.name in self.kinds):
                    self.mapped[step.index] = self.take()
            if (index := self.mapped.get(step.index)) is not None:
                out.append(replace(step, index=index))
        return out

    def new_round(self) -> None:
        self.mapped = {}

    def take(self) -> int:
        self.next += 1
        return self.next - 1


class Loop:
    def __init__(self, loop: ToolLoop, request: CanonicalRequest, ctx: RequestContext | None = None):
        self.loop = loop
        data = loop.data
        self.kinds = {function_name(kind_of(t)): t for t in data.get("tools") or [] if kind_of(t) in RUNNERS}
        self.deferred = [
            tool for tool in data.get("tools") or [] if tool["type"] == "function" and tool.get("defer_loading")
        ]
        self.conditions = data.get("stop_server_tools_when") or []
        self.limit = (
            MAX_TOOL_CALLS if self.conditions else min(data.get("max_tool_calls") or MAX_TOOL_CALLS, MAX_TOOL_CALLS)
        )
        self.request = request
        self.state = LoopState()
        self.tools = ToolContext(deferred=self.deferred, charge=loop.charge, ctx=ctx, keep=loop.keep)
        self.relay = Relay(self.kinds)
        self.entries: list[StageEntry] = []  # the tools' own pipeline entries (a fusion call's)

    def run(self, response: CanonicalResponse) -> Restaged:
        """The loop after a complete first round (the JSON path, a fusion panel member)."""
        return drain(self._rounds(response, self._called))

    def live(self, first: AttemptStream) -> Generator[LoopEvent, None, Restaged]:
        """The loop on a stream: the first round relayed as it arrives, then the loop with streamed rounds."""
        yield from self._relayed(first.events(), first.fold.close)
        assert first.response is not None
        return (yield from self._rounds(first.response, self._streamed))

    def _called(self, request: CanonicalRequest) -> Generator[LoopEvent, None, Served]:
        return self.loop.call(request)
        yield  # a generator that streams nothing

    def _streamed(self, request: CanonicalRequest) -> Generator[LoopEvent, None, Served]:
        assert self.loop.stream is not None
        self.relay.new_round()
        served = yield from self._relayed(self.loop.stream(request))
        assert served is not None
        return served

    def _relayed(
        self, events: Iterator[list[FoldStep] | _Waiting], close: Callable[[], list[FoldStep]] | None = None
    ) -> Generator[LoopEvent, None, Served | None]:
        """A round's stream, its steps over the whole answer's output indices (closed when the loop is: a round
        cut short is billed for what it generated)."""
        try:
            while True:
                try:
                    event = next(events)
                except StopIteration as stop:
                    if close is not None and (steps := self.relay.steps(close())):
                        yield steps
                    return stop.value
                if isinstance(event, _Waiting):
                    yield event
                elif steps := self.relay.steps(event):
                    yield steps
        finally:
            if isinstance(events, Generator):
                events.close()

    def _rounds(
        self, response: CanonicalResponse, call: Callable[[CanonicalRequest], Generator[LoopEvent, None, Served]]
    ) -> Generator[LoopEvent, None, Restaged]:
        first = self.loop.first()
        self.state.count(response.usage, first.endpoint if first else None)
        self.tools.model = first.endpoint.model_id if first else ""
        first_usage = response.usage
        # The answer's output: each round's items, then the server tool items it ran.
        output: list[OutputItem | ServerToolItem] = []
        conversation = list(self.request.input)
        request = self.request
        stopped = ""
        while True:
            server_calls = [i for i in response.output if isinstance(i, OutputFunctionCall) and i.name in self.kinds]
            caller_calls = [
                i for i in response.output if isinstance(i, OutputFunctionCall) and i.name not in self.kinds
            ]
            if caller_calls:
                stopped = "function_call"
                break
            if not server_calls:
                stopped = stopped or "answered"
                break
            if stopped:  # the last round was without server tools and the model called one anyway: not run
                break
            own = [i for i in response.output if not (isinstance(i, OutputFunctionCall) and i.name in self.kinds)]
            output += own
            stopped = self._stop(response)
            if stopped:  # the calls are not run: the model answers from what it has
                conversation += as_input(own)
                request = self._without_server_tools(request, conversation)
            else:
                ran, outputs = yield from self._run_calls(server_calls)
                output += ran
                outputs, found = self._scanned(outputs, self._found(request))
                conversation += as_input(response.output) + outputs
                request = self._next_request(request, conversation, found)
                if self.state.total_calls >= self.limit:
                    stopped = "max_tool_calls"
                    request = self._without_server_tools(request, conversation)
            served = yield from call(request)
            response = served.response
            self.state.rounds += 1
            self.state.count(response.usage, served.candidate.endpoint)
        output += [
            item for item in response.output if not (isinstance(item, OutputFunctionCall) and item.name in self.kinds)
        ]
        # routing.canonical's OutputItem cannot name ServerToolItem (routing.stages, above it); the renderers take both.
        merged = tuple(cast(list[OutputItem], output))
        final = replace(response, output=merged, usage=first_usage)  # the run adds the later rounds' usage
        figures = self._figures(stopped)
        entries = (self._entry(stopped), *self.entries)
        return Restaged(response=final, entries=entries, record={"plugins": {"server-tools": figures}})

    def _stop(self, response: CanonicalResponse) -> str:
        """Why the model's server-tool calls in this response are not run ("" : they are)."""
        if self.state.total_calls >= self.limit:
            return "max_tool_calls"
        return stop_condition(self.conditions, self.state, response)

    def _run_calls(
        self, calls: list[OutputFunctionCall]
    ) -> Generator[LoopEvent, None, tuple[list[ServerToolItem], list[Item]]]:
        """Run each call in turn (at most up to the limit: the rest get an error result the model reads), each
        streamed as it runs: its item added, its progress events, its item done."""
        ran: list[ServerToolItem] = []
        outputs: list[Item] = []
        for call in calls:
            tool = self.kinds[call.name]
            kind = kind_of(tool)
            index, item_id = self.relay.take(), new_item_id(kind)
            parameters = tool.get("parameters") or {}
            pending = pending_fields(kind, call.arguments, parameters)
            added = {"type": tool["type"], "id": item_id, "status": "in_progress", **pending}
            yield ToolEvent("added", index, added)
            started = time.perf_counter()
            if self.state.total_calls >= self.limit:
                result = ToolResult.failed(kind, "max_tool_calls reached: this call was not run")
            else:
                running = run_tool(kind, call.arguments, parameters, self.tools)
                result = yield from self._progress(running, index, added)
                self.state.calls[kind] = self.state.calls.get(kind, 0) + 1
                self.state.called.add(call.name)
            self.state.tool_ms += (time.perf_counter() - started) * 1000
            # the id announced, the caller's spelling of the type (gateway: or openrouter:)
            result.item.item.update(id=item_id, type=tool["type"])
            if result.entry is not None:
                self.entries.append(result.entry)
            yield ToolEvent("done", index, result.item.item)
            ran.append(result.item)
            outputs.append(FunctionCallOutput(call_id=call.call_id, output=result.for_model))
        return ran, outputs

    @staticmethod
    def _progress(
        running: Generator[dict[str, Any] | None, None, ToolResult], index: int, added: dict[str, Any]
    ) -> Generator[LoopEvent, None, ToolResult]:
        """A running tool's progress events (None from it: still working, time for a keep-alive)."""
        try:
            while True:
                try:
                    event = next(running)
                except StopIteration as stop:
                    return stop.value
                yield WAITING if event is None else ToolEvent("progress", index, added, event)
        finally:
            running.close()

    def _found(self, request: CanonicalRequest) -> tuple[FunctionTool, ...]:
        """The deferred tools tool_search found that the request does not declare yet."""
        known = {tool.name for tool in request.tools}
        return tuple(tool for tool in self.tools.found if tool.name not in known)

    def _scanned(
        self, outputs: list[Item], found: tuple[FunctionTool, ...]
    ) -> tuple[list[Item], tuple[FunctionTool, ...]]:
        """The round's results and the tools found, as the caller's guardrails let the model read them (ToolLoop.
        scan: redacted, or Refused). What the scan's own checks cost (an entity model) is charged with the request
        and their holds given back by its settlement, refused or not."""
        if self.loop.scan is None or not (outputs or found):
            return outputs, found
        try:
            scanned = self.loop.scan(CanonicalRequest(model="", input=tuple(outputs), tools=found))
        except GatewayError as error:  # over a scan budget (413), an entity check that cannot run: refused as well,
            # so that the request's run settles what ran (an error raised from the loop would leave its hold open)
            kind = STATUS_ERROR_TYPES.get(error.status, ErrorType.INVALID_REQUEST)
            raise Refused(
                Block(error.message, status=error.status, metadata=error.metadata or None, error_type=kind)
            ) from None
        if scanned.cost_usd:
            self.loop.charge(scanned.cost_usd, Usage())
        for hold in scanned.holds:
            if self.loop.keep is not None:  # set whenever `scan` is (responses_api.service)
                self.loop.keep(hold)
        if isinstance(scanned, Block):
            raise Refused(scanned)
        self.entries.extend(scanned.entries)
        return list(scanned.request.input), scanned.request.tools

    def _next_request(
        self, request: CanonicalRequest, conversation: list[Item], found: tuple[FunctionTool, ...]
    ) -> CanonicalRequest:
        """The next round: the conversation so far, the deferred tools tool_search found declared, and a forced
        tool choice (required, a named tool) relaxed to auto after the first round."""
        choice = request.tool_choice
        if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
            # still only the allowed tools, the deferred ones the caller allowed among them once found
            named = {ref.get("name") for ref in (self.loop.data.get("tool_choice") or {}).get("tools") or []}
            joined = [{"type": "function", "name": tool.name} for tool in found if tool.name in named]
            choice = {**choice, "mode": "auto", "tools": choice["tools"] + joined}
        elif choice not in (None, "auto", "none"):
            choice = "auto"
        return replace(request, input=tuple(conversation), tools=request.tools + found, tool_choice=choice)

    def _without_server_tools(self, request: CanonicalRequest, conversation: list[Item]) -> CanonicalRequest:
        """The last round: the conversation so far (the calls not run left out), the caller's tools only."""
        tools = tuple(tool for tool in request.tools if tool.name not in self.kinds)
        choice = request.tool_choice if tools else None
        if isinstance(choice, dict) and choice.get("name") in self.kinds:
            choice = "auto"
        if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
            # the caller's tools among the allowed ones, none when only server tools were allowed
            kept = [ref for ref in choice["tools"] if ref.get("name") not in self.kinds]
            choice = {**choice, "mode": "auto", "tools": kept} if kept else "none"
        return replace(request, input=tuple(conversation), tools=tools, tool_choice=choice)

    def _figures(self, stopped: str) -> dict[str, Any]:
        return {"calls": dict(self.state.calls), "rounds": self.state.rounds, "stopped": stopped}

    def _entry(self, stopped: str) -> StageEntry:
        calls = self.state.total_calls
        rounds = self.state.rounds
        outcome = f"{calls} call{'s' * (calls != 1)} in {rounds} round{'s' * (rounds != 1)}; stopped: {stopped}"
        return StageEntry(type="server_tools", name="server-tools", outcome=outcome, data=self._figures(stopped))
