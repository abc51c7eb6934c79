"""The server tools' registry: each tool the gateway runs itself is a Runner registered by the plugin that owns it
(plugins.registry registers them all when the app is ready; the server-tool loop, plugins.common.tool_loop, runs
them and never imports the plugins). A tool takes the model's arguments (a JSON string), the tool's `parameters`
from the request, and returns a ToolResult: the text the model reads and the output item the caller sees
(`gateway:<tool>` items, shaped like the openrouter SDK's `openrouter:<tool>` items). A tool that cannot do what the
model asked returns a failed result the model reads (never an exception). A tool with progress to report is a
generator: it yields its stream events as it runs (a web search's in_progress, searching, completed; a fusion run's
panel and analysis events; None: still working) and returns its result; `run_tool` keeps them on the item (a
buffered stream replays them).
"""

import json
import secrets
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from gateway.billing.services import ReservationHandle
from routing.canonical import FunctionTool, Usage
from routing.stages import SERVER_TOOL_RESULT_TOKENS, RequestContext, ServerToolItem, StageEntry

MAX_RESULT_CHARS = SERVER_TOOL_RESULT_TOKENS * 4  # what one result adds to the next round's input, at most
MAX_WEB_USES = 50  # searches or fetches per request, per tool (the hard limit)
ID_PREFIX = {
    "gateway:datetime": "dt",
    "gateway:search_models": "sm",
    "gateway:tool_search": "ts",
    "gateway:web_search": "ws",
    "gateway:web_fetch": "wf",
    "gateway:fusion": "fu",
}


@dataclass
class ToolContext:
    """What the tools of one request share: the deferred function tools (tool_search), the ones found so far
    (declared from the next round on), uses per tool, how to charge a tool's own cost and the tokens of its own
    model calls, the request's context (who pays: a fusion run's credit check) and the model that served the first
    round (a fusion run's default analyst)."""

    deferred: list[dict[str, Any]]
    charge: Callable[[Decimal, Usage], None]
    ctx: RequestContext | None = None
    model: str = ""
    found: list[FunctionTool] = field(default_factory=list)
    uses: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # the pages searched or fetched: url -> title
    # Keeps a hold a tool took (a gateway:fusion panel's) for the request's settlement to take over (ToolLoop.keep);
    # None: the tool gives it back itself once it ran (a fusion member's loop, charged by its run).
    keep: Callable[[ReservationHandle], None] | None = None


@dataclass(frozen=True)
class ToolResult:
    for_model: str  # the function_call_output the model reads (JSON)
    item: ServerToolItem  # the output item the caller sees
    entry: StageEntry | None = None  # the tool's own gateway_metadata.pipeline entry (a fusion run's)

    @classmethod
    def failed(cls, kind: str, error: str, **fields: Any) -> "ToolResult":
        item = {"type": kind, "id": new_item_id(kind), "status": "failed", **fields, "error": error}
        return cls(for_model=as_json({"error": error}), item=ServerToolItem(item=item))


def new_item_id(kind: str) -> str:
    return f"{ID_PREFIX.get(kind, 'st')}_{secrets.token_hex(12)}"


def as_json(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) > MAX_RESULT_CHARS:  # cut, still readable: the model sees that it was cut
        text = text[: MAX_RESULT_CHARS - 20] + " …[truncated]"
    return text


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def count_param(parameters: dict[str, Any], name: str, default: int, most: int) -> int:
    value = parameters.get(name)
    return max(1, min(int(value), most)) if isinstance(value, int) and not isinstance(value, bool) else default


def use_count(tools: ToolContext, kind: str, parameters: dict[str, Any]) -> str | None:
    """A web tool's use counted; the refusal when the request's uses are spent."""
    most = count_param(parameters, "max_uses", MAX_WEB_USES, MAX_WEB_USES)
    if tools.uses.get(kind, 0) >= most:
        return f"max_uses ({most}) reached for {kind}: no more calls of it in this request"
    tools.uses[kind] = tools.uses.get(kind, 0) + 1
    return None


ToolRun = Generator[dict[str, Any] | None, None, ToolResult]


def _no_fields(args: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Runner:
    """A tool: `run` it; `available` on this gateway; `pending`: the fields its item has while it runs (the
    openrouter SDK's item types require them on the item streamed as added)."""

    run: Callable[[dict[str, Any], dict[str, Any], ToolContext], ToolResult | ToolRun]
    available: Callable[[], bool] = lambda: True
    pending: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = _no_fields
    # The most one call costs by itself (its `parameters`), held with the request: None, nothing (a gateway:fusion
    # run is checked against the balance when it runs)
    price: Callable[[dict[str, Any]], Decimal] | None = None


# Filled by plugins.registry when the app is ready, in the order the tools are listed to the caller.
RUNNERS: dict[str, Runner] = {}


def runner_register(kind: str, runner: Runner) -> None:
    """A server tool joins the registry (plugins.registry registers every plugin's when the app is ready)."""
    RUNNERS[kind] = runner


def pending_fields(kind: str, arguments: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The fields a call's item has while it runs."""
    return RUNNERS[kind].pending(_arguments(arguments), parameters)


def run_tool(kind: str, arguments: str, parameters: dict[str, Any], tools: ToolContext) -> ToolRun:
    """Run one call: its progress events as it yields them, then its result (the events kept on its item)."""
    outcome = RUNNERS[kind].run(_arguments(arguments), parameters, tools)
    if isinstance(outcome, ToolResult):
        return outcome
    events: list[dict[str, Any]] = []
    try:
        while True:
            try:
                event = next(outcome)
            except StopIteration as stop:
                result: ToolResult = stop.value
                return replace(result, item=ServerToolItem(item=result.item.item, progress=tuple(events)))
            if event is not None:
                events.append(event)
            yield event
    finally:
        outcome.close()  # a loop stopped midway (the client left) stops the tool now: what it ran is charged
