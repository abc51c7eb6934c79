"""Who answers a fusion run and how (the fusion plugin's or the gateway:fusion tool's parameters): the panel
members, the analyst, their tools and limits; each member's plan and the request it is sent; what each answer, the
run's meter and its outcome hold."""

import threading
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.conf import settings

from gateway.billing.services import ReservationHandle
from gateway.errors import GatewayError
from plugins.common.caller import caller_prefs
from plugins.common.tool_loop import kind_of, usage_sum
from plugins.common.tools import RUNNERS
from routing.canonical import CanonicalRequest, Usage
from routing.limits import RoutingLimit
from routing.preferences import Preferences
from routing.selection import RoutePlan, RoutingCaller, endpoints_for_request
from routing.side_calls import (
    CallerPricing,
    call_charge,
)
from routing.stages import (
    SERVER_TOOL_RESULT_TOKENS,
    Block,
    RequestContext,
    Staged,
    ToolResultScan,
    server_function,
)

ROUTER_SLUGS = ("gateway/auto", "gateway/auto-beta", "gateway/pareto-code", "gateway/fusion")
# Staff edit these with settings.FUSION_PRESETS (the analyst is `model`, else the preset's first model).
DEFAULT_PRESETS: dict[str, list[str]] = {
    "general-high": ["anthropic/claude-opus-4.1", "openai/gpt-5", "x-ai/grok-4"],
    "general-budget": ["deepseek/deepseek-chat", "openai/gpt-4o-mini", "meta-llama/llama-3.3-70b-instruct"],
    "general-fast": ["anthropic/claude-haiku-4.5", "openai/gpt-4o-mini", "meta-llama/llama-3.3-70b-instruct"],
}
DEFAULT_PRESET = "general-high"
PANEL_TOOLS = ("gateway:web_search", "gateway:web_fetch", "gateway:datetime", "gateway:search_models")
DEFAULT_MAX_TOOL_CALLS = 4  # per panel member (the spec: 1-16)
DEFAULT_OUTPUT_TOKENS = 4096  # a member's output bound when the request sets no max_output_tokens
MSG_RECURSION = "fusion: {model} cannot be a fusion panel or analyst model (a fusion run cannot start another)"
MSG_ROUTER_MEMBER = "fusion: {model} is a router, not a model; name catalog models in analysis_models and model"
MSG_TOOLS = (
    "fusion: panel tools ({types}) are not available on this gateway; the panel can use {usable} (gateway:fusion "
    'never: a fusion run cannot start another); send "tools": [] to run the panel without tools'
)


@dataclass
class PanelAnswer:
    """One panel member's (or the analysis') outcome: its text, and what every round it ran cost (list price),
    tool costs included, and its tokens."""

    model: str
    status: str  # completed | failed
    text: str = ""
    provider: str = ""
    usage: Usage = field(default_factory=Usage)
    cost: Decimal = Decimal(0)
    error: str = ""
    status_code: int | None = None
    latency_ms: int = 0
    byok: bool = False  # the caller's own BYOK key served it (billed the BYOK fee)
    rounds: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # url -> title

    def as_entry(self) -> dict[str, Any]:
        entry = {
            "model": self.model,
            "status": self.status,
            "provider": self.provider,
            "tokens": {"input": self.usage.input_tokens, "output": self.usage.output_tokens},
            "cost_usd": float(self.cost),
            "latency_ms": self.latency_ms,
        }
        if self.byok:
            entry["is_byok"] = True
        if self.tool_calls or self.rounds > 1:
            entry |= {"rounds": self.rounds, "tool_calls": dict(self.tool_calls)}
        return {**entry, "error": self.error} if self.error else entry


@dataclass
class Meter:
    """What a run's calls spent so far (cost, tokens), added from the panel's threads as each round ends: charged
    however the run ends (a stream the client left stops it midway)."""

    cost: Decimal = Decimal(0)
    usage: Usage = field(default_factory=Usage)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The guardrail scans of the members' tool results: what their checks (an entity model) cost, in `cost` too,
    # each with the hold its call took (closed with the run's: taken over, or charged that cost).
    scans: list[tuple[ReservationHandle, Decimal]] = field(default_factory=list)
    scan_cost: Decimal = Decimal(0)
    refused: Block | None = None  # a guardrail refused what a member's tool would hand it: the run stops
    # What each call is charged: the BYOK fee when the caller's key served it (None: the list price)
    pricing: CallerPricing | None = None

    def add(self, cost: Decimal, usage: Usage) -> None:
        with self.lock:
            self.cost += cost
            self.usage = usage_sum((self.usage, usage))

    def refuse(self, block: Block) -> None:
        with self.lock:
            self.refused = self.refused or block

    @property
    def scan_holds(self) -> tuple[ReservationHandle, ...]:
        return tuple(hold for hold, _ in self.scans)

    def metered(self, scan: ToolResultScan | None) -> ToolResultScan | None:
        """`scan` with its checks' cost and holds kept here (not on the member's answer: the member's rounds are
        billed at most what worst_cost held for them, the checks out of their own holds)."""
        if scan is None:
            return None

        def metered_scan(request: CanonicalRequest) -> Staged | Block:
            result = scan(request)
            with self.lock:
                self.cost += result.cost_usd
                self.scan_cost += result.cost_usd
                for index, hold in enumerate(result.holds):  # one check, one hold: its cost on the first
                    self.scans.append((hold, result.cost_usd if index == 0 else Decimal(0)))
            return replace(result, cost_usd=Decimal(0), holds=())

        return metered_scan

    def close_scans(self, ctx: RequestContext) -> None:
        """The scans' holds closed when nothing takes them over (the run failed unexpectedly): each charged what its
        check cost."""
        for hold, cost in self.scans:
            call_charge(ctx, hold, cost=cost, usage=Usage())


@dataclass(frozen=True)
class Panel:
    """Who answers and how: the members, the analyst, the request each member gets (its tools declared), the
    members' server tools and their limit."""

    models: list[str]
    analyst: str
    preset: str | None
    tools: list[dict[str, Any]]
    max_tool_calls: int


@dataclass
class Fused:
    """A fusion run's outcome: the panel answers, the analysis (None: not parsed or not run) and its call."""

    answers: list[PanelAnswer]
    review: PanelAnswer | None = None
    analysis: dict[str, Any] | None = None
    analysis_status: str = "skipped"
    panel_ms: int = 0

    @property
    def served(self) -> list[PanelAnswer]:
        return [a for a in self.answers if a.status == "completed"]

    @property
    def calls(self) -> list[PanelAnswer]:
        return self.answers + ([self.review] if self.review else [])

    @property
    def cost(self) -> Decimal:
        return sum((a.cost for a in self.calls), Decimal(0))

    @property
    def usage(self) -> Usage:
        return usage_sum(a.usage for a in self.calls)

    def data(self, panel: Panel) -> dict[str, Any]:
        """The pipeline entry's data: each panel answer's model, status, tokens and cost, the analysis."""
        data: dict[str, Any] = {
            "preset": panel.preset,
            "panel": [a.as_entry() for a in self.answers],
            "panel_ms": self.panel_ms,
            "analyst": panel.analyst,
            "tools": [tool["type"] for tool in panel.tools],
            **({"max_tool_calls": panel.max_tool_calls} if panel.tools else {}),
        }
        if self.review is not None:
            review = self.review
            data["analysis"] = {
                "status": self.analysis_status,
                "provider": review.provider,
                "tokens": {"input": review.usage.input_tokens, "output": review.usage.output_tokens},
                "cost_usd": float(review.cost),
                **({"error": review.error} if review.error else {}),
                **({"result": self.analysis} if self.analysis is not None else {}),
            }
        return data

    def record(self, analyst: str) -> dict[str, Any]:
        """For the generation record: statuses, tokens and costs only (never answer text)."""
        return {
            "strategy": "fusion",
            "plugin": "fusion",
            "panel": [{k: v for k, v in a.as_entry().items() if k != "error"} for a in self.answers],
            "analyst": analyst,
            "analysis": self.analysis_status,
            "chosen": analyst,
            "cost_usd": float(self.cost),
        }


def presets() -> dict[str, list[str]]:
    return {**DEFAULT_PRESETS, **(getattr(settings, "FUSION_PRESETS", None) or {})}


def panel_settings(options: dict[str, Any], *, analyst: str | None = None) -> Panel | str:
    """The panel the options ask for (the fusion plugin's or the gateway:fusion tool's parameters), or why not:
    `analysis_models` else the preset's; the analyst `model`, else `analyst`, else the preset's first; `tools`
    (omitted: web search and web fetch when a search engine is configured), `max_tool_calls`."""
    preset_name = options.get("preset") or DEFAULT_PRESET
    preset = presets().get(preset_name) or DEFAULT_PRESETS[DEFAULT_PRESET]
    models = list(dict.fromkeys(options.get("analysis_models") or preset))
    chosen = options.get("model") or analyst or preset[0]
    for model in (*models, chosen):
        if model == "gateway/fusion":
            return MSG_RECURSION.format(model=model)
        if model in ROUTER_SLUGS:
            return MSG_ROUTER_MEMBER.format(model=model)
    tools = options.get("tools")
    if tools is None:
        search = RUNNERS.get("gateway:web_search")
        searching = search is not None and search.available()
        tools = [{"type": "gateway:web_search"}, {"type": "gateway:web_fetch"}] if searching else []
    usable = [kind for kind in PANEL_TOOLS if RUNNERS[kind].available()]
    refused = sorted({tool["type"] for tool in tools if kind_of(tool) not in usable})
    if refused:
        return MSG_TOOLS.format(types=", ".join(refused), usable=", ".join(usable))
    calls = options.get("max_tool_calls") or DEFAULT_MAX_TOOL_CALLS
    return Panel(
        models=models,
        analyst=chosen,
        preset=None if options.get("analysis_models") else preset_name,
        tools=[dict(tool) for tool in tools],
        max_tool_calls=calls,
    )


def member_plan(
    model: str,
    limits: tuple[RoutingLimit, ...],
    params: frozenset[str] = frozenset(),
    prefs: Preferences | None = None,
    caller: RoutingCaller | None = None,
) -> RoutePlan | GatewayError:
    """The member's candidates: the caller's limits and provider preferences (where its text may go), its BYOK keys
    that apply (`caller`: a model only its key can serve is served with it), and only endpoints that honour the
    request's `params` (its stop sequences, seed, logprobs: candidates.request_params), as the request's own plan."""
    try:
        return endpoints_for_request(models=[model], limits=limits, used_params=params, prefs=prefs, caller=caller)
    except GatewayError as error:
        return error


def member_plans(
    ctx: RequestContext, panel: Panel, limits: tuple[RoutingLimit, ...], params: frozenset[str] = frozenset()
) -> dict[str, RoutePlan | GatewayError]:
    """Every member's plan and the analyst's, for the caller (its preferences and BYOK keys)."""
    prefs, caller = caller_prefs(ctx), RoutingCaller.of(ctx.caller)
    return {model: member_plan(model, limits, params, prefs, caller) for model in (*panel.models, panel.analyst)}


def round_input(first: int, done: int, output: int) -> int:
    """A member's input in its round after `done` rounds: what it first sent, plus each round's output and tool
    result (the server-tool loop sends them back)."""
    return first + done * (output + SERVER_TOOL_RESULT_TOKENS)


def member_request(request: CanonicalRequest, panel: Panel) -> CanonicalRequest:
    """What each panel member is sent: the request, its panel tools declared, not streamed."""
    return replace(
        request,
        stream=False,
        tools=tuple(server_function(kind_of(tool)) for tool in panel.tools),
        tool_choice=None,
        parallel_tool_calls=None,
        max_output_tokens=request.max_output_tokens or DEFAULT_OUTPUT_TOKENS,  # what worst_cost assumed
    )
