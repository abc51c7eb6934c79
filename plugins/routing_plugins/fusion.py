"""fusion: the `analysis_models` panel answers in parallel (threads, each member through the attempt engine with its
own endpoint fallback, priced at its endpoint's list price); the analyst `model` compares the answers and returns
structured JSON (consensus, contradictions, partial coverage, unique insights, blind spots: the openrouter SDK's
FusionAnalysisResult). Two ways in:

- the model slug `gateway/fusion` (`fusion_stage`, a router pre-stage): the final answer is written by the analyst as
  the request's own routed call (so it streams, falls back and is billed like any request), its instructions
  carrying the panel answers and the analysis. The panel's and the analysis' costs are the stage's `cost_usd` and
  their tokens its `usage` (held, charged and added to the request's usage).
- the server tool `gateway:fusion` (`fusion_tool_run`, run by plugins.server_tools): the model asks the panel a
  question; the analysis and the answers are the tool result it reads, the call an output item of its own type
  (`gateway:fusion`, with `response.fusion_call.*` stream events as it runs), its cost and tokens charged with the
  request and its figures a pipeline entry. The analyst defaults to the model that called it.

The panel may use server tools (`tools`: default web search and web fetch when a search engine is configured, `[]`
none) up to `max_tool_calls` (1-16, default 4) each: a member runs through the server-tool loop, every round and
search billed, and what its tools hand it (search results, pages) is scanned by the caller's guardrails before its
next round, as the request's own loop is (RequestContext.result_scan): a redaction is what it reads, a block fails
the whole request with the guardrail's error (a fusion answer built from the other members would hide the refusal):
no member starts another round, the analysis and the final answer never run, and what ran is charged. A member that
fails is reported (status, error) and the run goes on; when all fail, the slug's request goes to the first panel
model as a plain request would (and fails as it would), the tool's call fails. A fusion run cannot start another:
gateway/fusion is no panel or analyst model, gateway:fusion no panel tool, and gateway/fusion is not given the
gateway:fusion tool."""

import json
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial
from typing import TypeVar

from django.conf import settings
from django.db import connection

from gateway.billing.services import ReservationHandle, SpendCapExceeded, holds_drop
from gateway.errors import GatewayError
from plugins import web_engines
from plugins.hosted_tools import capable_endpoints
from plugins.routing_plugins.candidates import caller_limits, caller_prefs, request_params
from plugins.routing_plugins.fusion_analysis import analysis_parse
from plugins.server_tools import Loop, Refused, drain, kind_of, usage_sum
from plugins.tools import RUNNERS, ToolContext, ToolResult, as_json, new_item_id
from routing.attempts import AttemptSequence, AttemptsFailed, Served
from routing.canonical import CanonicalRequest, CanonicalResponse, Message, OutputMessage, TextPart, Usage
from routing.errors import ErrorType, UpstreamError
from routing.limits import RoutingLimit
from routing.preferences import Preferences
from routing.pricing import max_cost, usage_cost
from routing.selection import Candidate, RoutePlan, RoutingCaller, endpoints_for_request
from routing.side_calls import (
    CHARS_PER_TOKEN,
    CallerPricing,
    bounded_usage,
    call_charge,
    call_hold,
    input_bound,
    output_bound,
    sent_tokens,
)
from routing.stages import (
    SERVER_TOOL_RESULT_TOKENS,
    Block,
    RequestContext,
    ServerToolItem,
    Staged,
    StageEntry,
    ToolLoop,
    ToolResultScan,
    server_function,
)

T = TypeVar("T")
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
MAX_ANSWER_CHARS = 20_000  # of each panel answer, in the analyst's and the writer's prompt
# And at most this many characters per output token the call may bill (its text is cut there): an honest answer
# has 3-5 a token, and the final answer's hold, taken before the panel runs, counts the writer's prompt at this.
ANSWER_CHARS_PER_TOKEN = 8
NO_ANALYSIS = "(no analysis available)"
ANSWER_HEADER_TOKENS = 32  # a panel answer's header in the analyst's prompt ("--- Panelist 2 (model) ---")
MSG_CREDITS = (
    "Insufficient credits for the fusion panel, analysis and final answer: they can cost up to {cost:.6f} USD; add "
    "credits or set max_output_tokens lower"
)
MSG_TOOL_CREDITS = "Insufficient credits for the fusion panel and analysis: they can cost up to {cost:.6f} USD"
DEFAULT_OUTPUT_TOKENS = 4096  # a member's output bound when the request sets no max_output_tokens
MSG_RECURSION = "fusion: {model} cannot be a fusion panel or analyst model (a fusion run cannot start another)"
MSG_RECURSION_TOOL = (
    "fusion: the model gateway/fusion cannot be given the gateway:fusion tool (a fusion run cannot start another)"
)
MSG_PARAM = "fusion: the panel model {model} cannot honour the request's {param}: {why}"
MSG_HOSTED = (
    "{source}: the tool type '{type}' is not available for the fusion analyst {analyst}, which writes the final "
    "answer: {why}"
)
MSG_ROUTER_MEMBER = "fusion: {model} is a router, not a model; name catalog models in analysis_models and model"
MSG_TOOLS = (
    "fusion: panel tools ({types}) are not available on this gateway; the panel can use {usable} (gateway:fusion "
    'never: a fusion run cannot start another); send "tools": [] to run the panel without tools'
)
ANALYST_INSTRUCTIONS = (
    "You are the analyst of a panel of models that answered the same request. Compare their answers and reply "
    "with one JSON object only, with these keys: "
    '"consensus": [strings: what the answers agree on], '
    '"contradictions": [{"topic": string, "stances": [{"model": panelist model, "stance": string}]}], '
    '"partial_coverage": [{"point": string, "models": [the panelist models that cover it]}], '
    '"unique_insights": [{"model": panelist model, "insight": string}] (valuable points one answer alone makes), '
    '"blind_spots": [strings: what every answer missed].'
)
WRITER_INSTRUCTIONS = (
    "A panel of models answered this request; their answers and an analyst's comparison follow. Write the best "
    "final answer to the request: keep the consensus, resolve the contradictions, add the unique insights, cover "
    "the blind spots. Do not mention the panel."
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

    def as_entry(self) -> dict:
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
    tools: list[dict]
    max_tool_calls: int


@dataclass
class Fused:
    """A fusion run's outcome: the panel answers, the analysis (None: not parsed or not run) and its call."""

    answers: list[PanelAnswer]
    review: PanelAnswer | None = None
    analysis: dict | None = None
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

    def data(self, panel: Panel) -> dict:
        """The pipeline entry's data: each panel answer's model, status, tokens and cost, the analysis."""
        data: dict = {
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

    def record(self, analyst: str) -> dict:
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


def panel_settings(options: dict, *, analyst: str | None = None) -> Panel | str:
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
        searching = bool(web_engines.configured_engines())
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


def _answer_text(output: tuple) -> str:
    """The member's answer: its messages after the last server tool call it made."""
    texts: list[str] = []
    for item in output:
        if isinstance(item, ServerToolItem):
            texts = []
        elif isinstance(item, OutputMessage):
            texts.append(item.text)
    return "".join(texts)


def _plan(
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


def _plans(
    ctx: RequestContext, panel: Panel, limits: tuple[RoutingLimit, ...], params: frozenset[str] = frozenset()
) -> dict[str, RoutePlan | GatewayError]:
    """Every member's plan and the analyst's, for the caller (its preferences and BYOK keys)."""
    prefs, caller = caller_prefs(ctx), RoutingCaller.of(ctx.caller)
    return {model: _plan(model, limits, params, prefs, caller) for model in (*panel.models, panel.analyst)}


def _call(
    model: str,
    request: CanonicalRequest,
    plan: RoutePlan | GatewayError,
    panel: Panel | None,
    meter: Meter,
    input_tokens: int | None = None,
    scan: ToolResultScan | None = None,
) -> PanelAnswer:
    """One model, with its own endpoint fallback, through the server-tool loop when `panel` gives it tools (every
    round and tool cost counted on the answer and the run's meter, a later round's failure too); never raises: a
    failure is the answer's status (a guardrail's refusal of a tool's result too: kept on `meter`, which stops every
    member before its next round). Each round's usage is billed at most at what worst_cost held for it (its input:
    `input_tokens`, else what the first round sent, grown by a round's output and tool result per round)."""
    started = time.monotonic()
    if isinstance(plan, GatewayError):
        return PanelAnswer(model, "failed", error=plan.message, status_code=plan.status)
    answer = PanelAnswer(model, "failed")
    first = sent_tokens(request) if input_tokens is None else input_tokens

    def bound(round_request: CanonicalRequest, done: int, response: CanonicalResponse, candidate: Candidate) -> Usage:
        held = _round_input(first, done, output_bound(round_request, candidate.endpoint))
        sent = min(sent_tokens(round_request), held)
        return bounded_usage(response.usage, round_request, candidate.endpoint, input_tokens=sent)

    def call(round_request: CanonicalRequest) -> Served:
        if meter.refused is not None:  # another member's tool result was refused: nothing more goes upstream
            raise Refused(meter.refused)
        done = answer.rounds
        try:
            served = AttemptSequence(
                candidates=plan.candidates,
                request_for=lambda c: replace(round_request, model=c.endpoint.upstream_model),
                bound_usage=lambda response, candidate: bound(round_request, done, response, candidate),
            ).call()
        except AttemptsFailed as failed:
            raise failed.error or UpstreamError(
                error_type=ErrorType.SERVER, message="no endpoint left", retryable=False
            ) from None
        answer.rounds += 1
        answer.provider = served.candidate.endpoint.provider_slug
        answer.byok = answer.byok or served.candidate.is_byok
        cost = usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
        if meter.pricing is not None:  # the BYOK fee when the caller's key served, as the request's own call
            cost = meter.pricing.charge(served.candidate, cost)
        charge(cost, served.response.usage)
        return served

    def charge(amount: Decimal, usage: Usage) -> None:
        answer.cost += amount
        answer.usage = usage_sum((answer.usage, usage))
        meter.add(amount, usage)

    try:
        served = call(request)
        output = served.response.output
        if panel is not None and panel.tools:
            data = {"tools": panel.tools, "max_tool_calls": panel.max_tool_calls}
            tool_loop = ToolLoop(data=data, call=call, first=lambda: served.candidate, charge=charge, scan=scan)
            loop = Loop(tool_loop, request)
            output = loop.run(served.response).response.output
            answer.tool_calls, answer.sources = loop.state.calls, loop.tools.sources
        answer.text, answer.status = _answer_text(output), "completed"
    except UpstreamError as error:
        answer.error, answer.status_code = error.message or "failed", error.status
    except Refused as refused:
        meter.refuse(refused.block)
        answer.error, answer.status_code = refused.block.message, refused.block.status
    finally:
        answer.latency_ms = _ms(started)
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()  # a panel thread's own connection (when the plan or a tool read the database)
    return answer


def _waiting(fn: Callable[[], T]) -> Generator[None, None, T]:
    """`fn` run in a thread, None yielded every keep-alive interval until it returns."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusion") as pool:
        future = pool.submit(fn)
        while not wait([future], timeout=settings.STREAM_KEEPALIVE_SECONDS).done:
            yield None
        return future.result()


def panel_event(answer: PanelAnswer) -> dict:
    if answer.status == "completed":
        return {"type": "response.fusion_call.panel.completed", "model": answer.model, "content": answer.text}
    event = {"type": "response.fusion_call.panel.failed", "model": answer.model, "error": answer.error}
    return {**event, "status_code": answer.status_code} if answer.status_code else event


def fuse(
    request: CanonicalRequest,
    panel: Panel,
    plans: dict[str, RoutePlan | GatewayError],
    meter: Meter,
    scan: ToolResultScan | None = None,
) -> Generator[dict | None, None, Fused]:
    """The panel in parallel (each member's events as it finishes; None: time for a keep-alive), then the
    analysis when any member answered; what each call spends is added to `meter` as it ends. `scan`: the caller's
    guardrails' scan of what a member's tools hand it; raises Refused (once every member stopped) when it refused."""
    started = time.monotonic()
    member_request = _member_request(request, panel)
    answers: dict[int, PanelAnswer] = {}
    scan = meter.metered(scan)
    with ThreadPoolExecutor(max_workers=len(panel.models), thread_name_prefix="fusion-panel") as pool:
        futures: dict[Future, int] = {
            pool.submit(_call, model, member_request, plans[model], panel, meter, None, scan): index
            for index, model in enumerate(panel.models)
        }
        for model in panel.models:
            yield {"type": "response.fusion_call.panel.added", "model": model}
        pending = set(futures)  # stopped midway (the generator closed), the pool still waits for its members
        while pending:
            done, pending = wait(pending, timeout=settings.STREAM_KEEPALIVE_SECONDS, return_when=FIRST_COMPLETED)
            if not done:
                yield None
            for future in sorted(done, key=futures.__getitem__):
                answers[futures[future]] = answer = future.result()
                yield panel_event(answer)
    if meter.refused is not None:  # the whole run fails with the guardrail's refusal: no analysis, no answer
        raise Refused(meter.refused)
    fused = Fused(answers=[answers[index] for index in range(len(panel.models))], panel_ms=_ms(started))
    if not fused.served:
        return fused
    analysis_request = _analysis_request(request, fused.served)
    analysis_input = _analysis_input(request, len(panel.models))  # what worst_cost held for it
    yield {
        "type": "response.fusion_call.analysis.in_progress",
        "analyst_model": panel.analyst,
        "judge_model": panel.analyst,
    }
    review = yield from _waiting(
        lambda: _call(panel.analyst, analysis_request, plans[panel.analyst], None, meter, analysis_input)
    )
    fused.review = review
    fused.analysis = analysis_parse(review.text) if review.status == "completed" else None
    fused.analysis_status = "completed" if fused.analysis is not None else review.status if review.error else "unparsed"
    if fused.analysis is not None:
        yield {"type": "response.fusion_call.analysis.completed", "analysis": fused.analysis}
    return fused


def worst_cost(
    request: CanonicalRequest,
    plans: list[RoutePlan | GatewayError],
    analyst: RoutePlan | GatewayError,
    *,
    panel: Panel,
    final_answer: bool = True,
    pricing: CallerPricing | None = None,
) -> Decimal:
    """The most the run can cost: each call's (panel, analysis, final answer) dearest candidate for what it sends
    (routing.side_calls: the input as the gateway estimates it; the analyst also reads every panel answer, each at most
    the output a member may bill) and its output bound; a member with tools makes up to `max_tool_calls` more
    rounds, each reading its last output and a tool result more, each call a search at the dearest engine's
    price. Each call is billed at most what is counted for it here (_call), so the run never costs more. With
    `pricing`, a candidate on the caller's BYOK key counts its fee, as it is charged (else its list price)."""
    tool_calls = panel.max_tool_calls if panel.tools else 0
    searching = any(kind_of(tool) == "gateway:web_search" for tool in panel.tools)
    search_price = max(map(web_engines.engine_price, web_engines.configured_engines()), default=Decimal(0))
    member = _member_request(request, panel)
    first = sent_tokens(member)
    analysis = _analysis_input(request, len(plans))
    total = len(plans) * tool_calls * search_price if searching else Decimal(0)
    for plan in plans:
        for done in range(tool_calls + 1):
            total += _dearest(plan, member, partial(_round_input, first, done), pricing)
    total += _dearest(analyst, _analysis_request(request, []), lambda out: analysis, pricing)
    if final_answer and not isinstance(analyst, GatewayError):
        # the request's own hold (responses_api holds it, taking this one over): its input the panel answers and
        # the analysis, its output limit the endpoint's maximum when the request sets none, as that hold counts it
        limit = request.max_output_tokens or max(c.endpoint.max_completion_tokens or 0 for c in analyst.candidates)
        final = replace(member, max_output_tokens=limit or DEFAULT_OUTPUT_TOKENS)
        total += _dearest(analyst, final, lambda out: analysis + out, pricing)
    return total


def _dearest(
    plan: RoutePlan | GatewayError,
    request: CanonicalRequest,
    input_tokens: Callable[[int], int],
    pricing: CallerPricing | None = None,
) -> Decimal:
    """A call's worst case: its dearest candidate, billed its input bound (`input_tokens` of the call's output
    bound) and its output bound; with `pricing`, the dearest BYOK candidate at its fee (counted in the month for the
    calls after it, as the charges are: never less than they come to)."""
    if isinstance(plan, GatewayError):
        return Decimal(0)
    costs = [
        (
            c.is_byok,
            max_cost(
                endpoint=c.endpoint,
                input_tokens=input_bound(input_tokens(output_bound(request, c.endpoint)), c.endpoint),
                max_output_tokens=output_bound(request, c.endpoint),
            ),
        )
        for c in plan.candidates
    ]
    if pricing is None:
        return max(cost for _, cost in costs)
    shared = max((cost for byok, cost in costs if not byok), default=Decimal(0))
    byok = max((cost for byok, cost in costs if byok), default=None)
    return shared if byok is None else max(shared, pricing.byok(byok))


def _round_input(first: int, done: int, output: int) -> int:
    """A member's input in its round after `done` rounds: what it first sent, plus each round's output and tool
    result (the server-tool loop sends them back)."""
    return first + done * (output + SERVER_TOOL_RESULT_TOKENS)


def _member_request(request: CanonicalRequest, panel: Panel) -> CanonicalRequest:
    """What each panel member is sent: the request, its panel tools declared, not streamed."""
    return replace(
        request,
        stream=False,
        tools=tuple(server_function(kind_of(tool)) for tool in panel.tools),
        tool_choice=None,
        parallel_tool_calls=None,
        max_output_tokens=request.max_output_tokens or DEFAULT_OUTPUT_TOKENS,  # what worst_cost assumed
    )


def _analysis_request(request: CanonicalRequest, served: list[PanelAnswer]) -> CanonicalRequest:
    return CanonicalRequest(
        model="",
        instructions=ANALYST_INSTRUCTIONS,
        input=(
            Message(
                role="user",
                content=(TextPart(f"Request:\n{_question(request)}\n\nAnswers:\n{_answers_block(served, request)}"),),
            ),
        ),
        text_format={"type": "json_object"},
        temperature=0,
        max_output_tokens=request.max_output_tokens or DEFAULT_OUTPUT_TOKENS,
    )


def _analysis_input(request: CanonicalRequest, members: int) -> int:
    """The analyst's input bound: its instructions and the question, and each member's answer at most what the
    member may bill as output (and at most MAX_ANSWER_CHARS), with its header."""
    answer = min(request.max_output_tokens or DEFAULT_OUTPUT_TOKENS, MAX_ANSWER_CHARS // CHARS_PER_TOKEN)
    return sent_tokens(_analysis_request(request, [])) + members * (answer + ANSWER_HEADER_TOKENS)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _question(request: CanonicalRequest) -> str:
    texts = []
    for item in request.input:
        if isinstance(item, Message):
            body = "\n".join(p.text for p in item.content if isinstance(p, TextPart))
            texts.append(f"[{item.role}] {body}")
    return "\n\n".join(texts)[-MAX_ANSWER_CHARS:]


def _shown_chars(request: CanonicalRequest) -> int:
    """The most characters of a panel answer (or of the analysis) the analyst and the writer read."""
    return min(MAX_ANSWER_CHARS, (request.max_output_tokens or DEFAULT_OUTPUT_TOKENS) * ANSWER_CHARS_PER_TOKEN)


def _answers_block(answers: list[PanelAnswer], request: CanonicalRequest) -> str:
    shown = _shown_chars(request)
    return "\n\n".join(
        f"--- Panelist {index} ({a.model}) ---\n{a.text[:shown]}" for index, a in enumerate(answers, start=1)
    )


def _writer_instructions(request: CanonicalRequest, served: list[PanelAnswer], analysis: dict | None) -> str:
    """The final answer's instructions: the request's, then the panel answers and the analysis for the writer."""
    analysis_text = (
        json.dumps(analysis, ensure_ascii=False)[: _shown_chars(request)] if analysis is not None else NO_ANALYSIS
    )
    return (f"{request.instructions}\n\n" if request.instructions else "") + (
        f"{WRITER_INSTRUCTIONS}\n\nPanel answers:\n{_answers_block(served, request)}\n\n"
        f"Analysis (JSON):\n{analysis_text}"
    )


def _writer_tokens(request: CanonicalRequest, panel: Panel) -> int:
    """The most input tokens the writer's instructions add to the request, as the request's own hold estimates its
    input (4 characters a token): every member answering at most what _answers_block shows, the analysis too."""
    shown = _shown_chars(request)
    answers = [PanelAnswer(model, "completed", text="x" * shown) for model in panel.models]
    analyses = ({"consensus": ["x" * shown]}, None)  # one cut at `shown`, or none (NO_ANALYSIS: it may be longer)
    longest = max(len(_writer_instructions(request, answers, analysis)) for analysis in analyses)
    return (longest - len(request.instructions or "")) // CHARS_PER_TOKEN + 1


# ---- the model slug gateway/fusion -------------------------------------------------------------------------


def panel_hold(
    ctx: RequestContext,
    worst: Decimal,
    *,
    label: str,
    plans: dict[str, RoutePlan | GatewayError],
    list_worst: Callable[[], Decimal],
) -> ReservationHandle | GatewayError:
    """A fusion panel's worst case (worst_cost) held before it runs (routing.side_calls.call_hold: the credits,
    the key's limit and every guardrail budget): two requests, or two runs in one, cannot spend the same credits or
    budget, and a panel they cannot cover never runs. The request's hold or its settlement takes it over. `worst`
    counts a call on the caller's BYOK key at its fee; budgets counting BYOK hold it to its list price
    (`list_worst`), as the request's own hold does."""
    byok = any(c.is_byok for plan in plans.values() if isinstance(plan, RoutePlan) for c in plan.candidates)
    return call_hold(ctx, worst, label=label, cap_worst=list_worst() if byok else None)


def _final_hold(request: CanonicalRequest, ctx: RequestContext, panel: Panel) -> Decimal | GatewayError | None:
    """What the request's own hold will need once the panel ran, by that hold's own estimate (ctx.own_hold): the
    analyst writing the final answer, its input the request and the writer's instructions at their longest; or,
    when every member fails, the request sent to the first member as it is. The panel's hold covers it, so that
    hold, taking the panel's over, is never refused after the panel ran. The refusal when the analyst cannot take
    that input; None without a pipeline (worst_cost's own estimate of the final answer then)."""
    if ctx.own_hold is None:
        return None
    try:
        final = ctx.own_hold(request, (panel.analyst,), _writer_tokens(request, panel))
    except GatewayError as error:
        return error
    try:
        plain = ctx.own_hold(request, (panel.models[0],), 0)
    except GatewayError:  # that plain request then fails as one would: the panel held nothing for it
        plain = Decimal(0)
    return max(final, plain)


def fusion_stage(
    request: CanonicalRequest, ctx: RequestContext, *, options: dict, limits: tuple[RoutingLimit, ...]
) -> Staged | Block:
    panel = panel_settings(options)
    if isinstance(panel, str):
        return Block(panel, status=400)
    if any(tool.name == "gateway_fusion" for tool in request.tools):
        return Block(MSG_RECURSION_TOOL, status=400)
    params = request_params(request)  # each member gets them (the analyst too: it writes the final answer)
    plans = _plans(ctx, panel, limits, params)
    for model, plan in plans.items():  # a member that cannot honour them: refused before any paid call
        if isinstance(plan, GatewayError) and (param := plan.metadata.get("param")) in params:
            return Block(
                MSG_PARAM.format(model=model, param=param, why=plan.message), status=400, metadata={"param": param}
            )
    analyst_plan = plans[panel.analyst]
    if isinstance(analyst_plan, GatewayError):  # refused before any paid call: the analyst writes the answer
        return Block(f"fusion analyst {panel.analyst}: {analyst_plan.message}", status=analyst_plan.status)
    if request.hosted_tools and not (capable := capable_endpoints([panel.analyst], request.hosted_tools)).endpoint_ids:
        # the final answer is the analyst's: refused now, before the panel is paid for (plugins.hosted_tools)
        tool = request.hosted_tools[max(capable.index, 0)]
        message = MSG_HOSTED.format(
            source=tool.source, type=tool.spec.get("type"), analyst=panel.analyst, why=capable.why
        )
        return Block(message, status=400, metadata={"param": tool.source})
    # the members answer without the provider-run tools (their endpoints were not chosen for them; the panel's own
    # `tools` search), the final answer runs them
    panel_request = replace(request, tools=(), tool_choice=None, hosted_tools=())
    final = _final_hold(request, ctx, panel)
    if isinstance(final, GatewayError):  # the final answer could not be routed: refused before any paid call
        return Block(final.message, status=final.status, metadata=final.metadata or None)
    members = [plans[model] for model in panel.models]
    pricing = CallerPricing(ctx)
    worst_of = partial(worst_cost, panel_request, members, analyst_plan, panel=panel, final_answer=final is None)
    worst = worst_of(pricing=CallerPricing(ctx)) + (final or 0)
    # The panel runs before the request's own hold: its worst case (the final answer's included) is held first;
    # the request's hold takes it over (the pipeline), or a refused request's charge does.
    hold = panel_hold(
        ctx, worst, label="gateway/fusion (panel)", plans=plans, list_worst=lambda: worst_of() + (final or 0)
    )
    if isinstance(hold, SpendCapExceeded):
        return Block(hold.message, status=403)
    if isinstance(hold, GatewayError):
        return Block(MSG_CREDITS.format(cost=worst), status=402)
    meter = Meter(pricing=pricing)
    try:
        return _fused(request, panel, drain(fuse(panel_request, panel, plans, meter, _scan(ctx, panel))), meter, hold)
    except Refused as refused:
        # A guardrail refused what a member's tool fetched: the request is refused with its error, charged what ran
        # (the members' rounds and tools, the scans' checks) out of the holds taken for them.
        holds = (hold, *meter.scan_holds)
        return replace(refused.block, cost_usd=meter.cost, holds=holds)
    except BaseException:
        # Failed midway (a bug, not a model's failure: those are answers): what the calls that ran spent is charged
        # out of the hold (each at most what the hold counted for it), the rest given back.
        call_charge(ctx, hold, cost=meter.cost - meter.scan_cost, usage=meter.usage)
        meter.close_scans(ctx)
        raise


def _scan(ctx: RequestContext, panel: Panel) -> ToolResultScan | None:
    """The caller's guardrails' scan of what the members' tools hand them: the request's own loop's when the run
    is its gateway:fusion tool, else the one the pipeline offers for this context (its budgets); None without tools
    or content filters."""
    if not panel.tools:
        return None
    if ctx.tool_loop is not None and ctx.tool_loop.scan is not None:
        return ctx.tool_loop.scan
    return ctx.result_scan(ctx) if ctx.result_scan is not None else None


def _fused(request: CanonicalRequest, panel: Panel, fused: Fused, meter: Meter, hold: ReservationHandle) -> Staged:
    """The stage's result once the panel ran: the final answer's request (the writer's instructions) for the
    analyst, or the request as it is for the first member when every member failed; the panel's hold (and the
    holds of the guardrails' checks of the members' tool results) handed on."""
    data = fused.data(panel)
    cost, usage = fused.cost + meter.scan_cost, fused.usage
    holds = (hold, *meter.scan_holds)
    if meter.scan_cost:
        data["guardrail_checks_cost_usd"] = float(meter.scan_cost)
    if not fused.served:  # as a plain request to the first panel model: its error (or its answer, if it recovered)
        data["fallback"] = f"every panel model failed: the request went to {panel.models[0]} as a plain request"
        entry = StageEntry("request_plugin", "fusion", "all panel models failed", data=data, cost_usd=cost)
        return Staged(
            request=request,
            models=(panel.models[0],),
            strategy="fusion",
            entries=(entry,),
            cost_usd=cost,
            usage=usage,
            record={"router": fused.record(panel.analyst)},
            holds=holds,
        )
    instructions = _writer_instructions(request, fused.served, fused.analysis)
    failed = len(fused.answers) - len(fused.served)
    summary = f"{len(fused.served)} of {len(fused.answers)} panel answers" + (f" ({failed} failed)" if failed else "")
    outcome = summary + f"; final answer by {panel.analyst}"
    entry = StageEntry("request_plugin", "fusion", outcome, data=data, cost_usd=cost)
    return Staged(
        request=replace(request, instructions=instructions),
        models=(panel.analyst,),
        strategy="fusion",
        entries=(entry,),
        cost_usd=cost,
        usage=usage,
        record={"router": fused.record(panel.analyst)},
        holds=holds,
    )


# ---- the server tool gateway:fusion ------------------------------------------------------------------------


def fusion_tool_run(args: dict, parameters: dict, tools: ToolContext) -> Generator[dict | None, None, ToolResult]:
    """The model's question to a fusion panel: the analysis and the answers are what it reads; the call's item
    has the analysis, each answer, the failed members and the pages the panel read."""
    kind = "gateway:fusion"
    ctx = tools.ctx
    assert ctx is not None, "gateway:fusion runs within a request"
    prompt = str(args.get("prompt") or args.get("query") or "").strip() or (
        _question(ctx.request) if ctx.request else ""
    )
    if not prompt:
        return ToolResult.failed(kind, "prompt is required: the question for the panel")
    panel = panel_settings(parameters, analyst=tools.model)
    if isinstance(panel, str):
        return ToolResult.failed(kind, panel, failure_reason="invalid_model")
    request = CanonicalRequest(
        model="",
        input=(Message(role="user", content=(TextPart(prompt),)),),
        temperature=parameters.get("temperature"),
        max_output_tokens=parameters.get("max_completion_tokens") or DEFAULT_OUTPUT_TOKENS,
    )
    plans = _plans(ctx, panel, caller_limits(ctx))
    analyst_plan = plans[panel.analyst]
    if isinstance(analyst_plan, GatewayError):
        return ToolResult.failed(
            kind, f"analyst {panel.analyst}: {analyst_plan.message}", failure_reason="invalid_model"
        )
    pricing = CallerPricing(ctx)
    worst_of = partial(worst_cost, request, [plans[m] for m in panel.models], analyst_plan, panel=panel)
    worst = worst_of(final_answer=False, pricing=CallerPricing(ctx))
    # The panel's worst case is held (credits, key limit, budgets) until the request's settlement takes it over,
    # charging what it spent.
    hold = panel_hold(
        ctx, worst, label="gateway:fusion (panel)", plans=plans, list_worst=lambda: worst_of(final_answer=False)
    )
    if isinstance(hold, SpendCapExceeded):
        return ToolResult.failed(kind, hold.message, failure_reason="budget_exceeded")
    if isinstance(hold, GatewayError):
        return ToolResult.failed(kind, MSG_TOOL_CREDITS.format(cost=worst), failure_reason="insufficient_credits")
    if tools.keep is not None:
        tools.keep(hold)
    yield {"type": "response.fusion_call.in_progress"}
    meter = Meter(pricing=pricing)
    try:
        # a guardrail's refusal of what a member's tool fetched (Refused) ends the request's loop: the request is
        # refused with its error, as when the caller's own model's tool result is refused
        fused = yield from fuse(request, panel, plans, meter, _scan(ctx, panel))
    finally:  # what ran is charged however the run ended (the client left a stream midway, say)
        tools.charge(meter.cost, meter.usage)
        if tools.keep is not None:
            for scan_hold in meter.scan_holds:
                tools.keep(scan_hold)
        else:
            holds_drop((hold, *meter.scan_holds))
    yield {"type": "response.fusion_call.completed"}
    failed = [
        {"model": a.model, "error": a.error, **({"status_code": a.status_code} if a.status_code else {})}
        for a in fused.answers
        if a.status != "completed"
    ]
    sources = {url: title for answer in fused.served for url, title in answer.sources.items()}
    item: dict = {
        "type": kind,
        "id": new_item_id(kind),
        "status": "completed" if fused.served else "failed",
        "responses": [{"model": a.model, "content": a.text} for a in fused.served],
        **({"failed_models": failed} if failed else {}),
        **({"analysis": fused.analysis} if fused.analysis is not None else {}),
        **({"sources": [{"title": title, "url": url} for url, title in sources.items()]} if sources else {}),
    }
    summary = f"{len(fused.served)} of {len(fused.answers)} panel answers; analysis {fused.analysis_status}"
    entry = StageEntry("server_tools", kind, summary, data=fused.data(panel), cost_usd=fused.cost)
    if not fused.served:
        item |= {"failure_reason": "all_panels_failed", "error": "every panel model failed"}
        refused = {"error": "every panel model failed", "failed_models": failed}
        return ToolResult(for_model=as_json(refused), item=ServerToolItem(item=item), entry=entry)
    if fused.analysis is None:
        item["error"] = f"the analyst {panel.analyst} returned no analysis ({fused.analysis_status})"
    share = MAX_ANSWER_CHARS // max(1, len(fused.served))
    said: dict = {
        "analysis": fused.analysis,
        "answers": [{"model": a.model, "content": a.text[:share]} for a in fused.served],
    }
    return ToolResult(for_model=as_json(said), item=ServerToolItem(item=item), entry=entry)
