"""fusion (`gateway/fusion`): the `analysis_models` panel answers the request in parallel (threads, each member
through the attempt engine with its own endpoint fallback, priced at its endpoint's list price); the analyst
`model` compares the answers and returns structured JSON (consensus, contradictions, partial coverage, unique
insights, blind spots); the final answer is written by the analyst as the request's own routed call (so it
streams, falls back and is billed like any request), its instructions carrying the panel answers and the
analysis. The panel's and the analysis' costs are the stage's `cost_usd` (held and charged with the request).

A panel member that fails is reported (status, error) and the run goes on; when all fail, the request goes to
the first panel model as a plain request would (and fails as it would). Panel tools (web search, web fetch) are
not available on this gateway yet: `tools` must be `[]` or omitted. A fusion run cannot start another."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings
from django.db import connection

from gateway.accounts.models import Account
from gateway.errors import GatewayError
from plugins.healing import repair_bounded
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, CanonicalResponse, Message, TextPart
from routing.limits import RoutingLimit
from routing.pricing import max_cost, usage_cost
from routing.selection import RoutePlan, endpoints_for_request
from routing.stages import Block, RequestContext, Staged, StageEntry

ROUTER_SLUGS = ("gateway/auto", "gateway/auto-beta", "gateway/pareto-code", "gateway/fusion")
# Staff edit these with settings.FUSION_PRESETS (the analyst is `model`, else the preset's first model).
DEFAULT_PRESETS: dict[str, list[str]] = {
    "general-high": ["anthropic/claude-opus-4.1", "openai/gpt-5", "x-ai/grok-4"],
    "general-budget": ["deepseek/deepseek-chat", "openai/gpt-4o-mini", "meta-llama/llama-3.3-70b-instruct"],
    "general-fast": ["anthropic/claude-haiku-4.5", "openai/gpt-4o-mini", "meta-llama/llama-3.3-70b-instruct"],
}
DEFAULT_PRESET = "general-high"
MAX_ANSWER_CHARS = 20_000  # of each panel answer, in the analyst's and the writer's prompt
ANALYSIS_KEYS = ("consensus", "contradictions", "partial_coverage", "unique_insights", "blind_spots")
MSG_CREDITS = (
    "Insufficient credits for the fusion panel, analysis and final answer: they can cost up to {cost:.6f} USD; add "
    "credits or set max_output_tokens lower"
)
DEFAULT_OUTPUT_TOKENS = 4096  # a member's output bound when the request sets no max_output_tokens
MSG_RECURSION = "fusion: {model} cannot be a fusion panel or analyst model (a fusion run cannot start another)"
MSG_ROUTER_MEMBER = "fusion: {model} is a router, not a model; name catalog models in analysis_models and model"
MSG_TOOLS = (
    'fusion: panel tools ({types}) are not available on this gateway; send "tools": [] (or omit it) to run the '
    "panel without tools"
)
ANALYST_INSTRUCTIONS = (
    "You are the analyst of a panel of models that answered the same request. Compare their answers and reply "
    "with one JSON object only, with these keys, each a list of short strings: "
    '"consensus" (what the answers agree on), "contradictions" (where they disagree, naming the panelists), '
    '"partial_coverage" (points only some answers cover), "unique_insights" (valuable points one answer alone '
    'makes), "blind_spots" (what every answer missed).'
)
WRITER_INSTRUCTIONS = (
    "A panel of models answered this request; their answers and an analyst's comparison follow. Write the best "
    "final answer to the request: keep the consensus, resolve the contradictions, add the unique insights, cover "
    "the blind spots. Do not mention the panel."
)


@dataclass
class PanelAnswer:
    model: str
    status: str  # completed | failed
    text: str = ""
    provider: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    error: str = ""
    latency_ms: int = 0

    def as_entry(self) -> dict:
        entry = {
            "model": self.model,
            "status": self.status,
            "provider": self.provider,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost_usd": float(self.cost),
            "latency_ms": self.latency_ms,
        }
        return {**entry, "error": self.error} if self.error else entry


def presets() -> dict[str, list[str]]:
    return {**DEFAULT_PRESETS, **(getattr(settings, "FUSION_PRESETS", None) or {})}


def _text(response: CanonicalResponse) -> str:
    return "".join(getattr(item, "text", "") or "" for item in response.output)


def _plan(model: str, limits: tuple[RoutingLimit, ...]) -> RoutePlan | GatewayError:
    try:
        return endpoints_for_request(models=[model], limits=limits)
    except GatewayError as error:
        return error


def _call(model: str, request: CanonicalRequest, plan: RoutePlan | GatewayError) -> PanelAnswer:
    """One model, with its own endpoint fallback; never raises (a failure is the answer's status)."""
    started = time.monotonic()
    if isinstance(plan, GatewayError):
        return PanelAnswer(model, "failed", error=plan.message)
    try:
        served = AttemptSequence(
            candidates=plan.candidates, request_for=lambda c: replace(request, model=c.endpoint.upstream_model)
        ).call()
    except AttemptsFailed as failed:
        return PanelAnswer(model, "failed", error=str(failed.error or "no endpoint left"), latency_ms=_ms(started))
    finally:
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()  # a panel thread's own connection (when the plan read the database)
    usage = served.response.usage
    return PanelAnswer(
        model,
        "completed",
        text=_text(served.response),
        provider=served.candidate.endpoint.provider_slug,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost=usage_cost(endpoint=served.candidate.endpoint, usage=usage),
        latency_ms=_ms(started),
    )


def worst_cost(
    request: CanonicalRequest, panel: list[RoutePlan | GatewayError], analyst: RoutePlan | GatewayError
) -> Decimal:
    """The most the run can cost: each call's (panel, analysis, final answer) dearest candidate for its input
    (roughly 4 characters a token; the analyst also reads every panel answer) and its output limit."""
    chars = len(request.instructions or "") + len(_question(request))
    output = request.max_output_tokens or DEFAULT_OUTPUT_TOKENS
    calls = [(plan, chars // 4 + 1) for plan in panel] + [
        (analyst, chars // 4 + 1 + output * len(panel)),  # the analysis
        (analyst, chars // 4 + 1 + output * (len(panel) + 1)),  # the final answer (the request's own hold)
    ]
    total = Decimal(0)
    for plan, tokens in calls:
        if isinstance(plan, GatewayError):
            continue
        total += max(
            max_cost(
                endpoint=c.endpoint,
                input_tokens=tokens,
                max_output_tokens=min(output, c.endpoint.max_completion_tokens or output),
            )
            for c in plan.candidates
        )
    return total


def spendable(ctx: RequestContext) -> Decimal:
    account = Account.objects.filter(pk=ctx.caller.account_id).values("balance", "reserved").first()
    return account["balance"] - account["reserved"] if account else Decimal(0)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _question(request: CanonicalRequest) -> str:
    texts = []
    for item in request.input:
        if isinstance(item, Message):
            body = "\n".join(p.text for p in item.content if isinstance(p, TextPart))
            texts.append(f"[{item.role}] {body}")
    return "\n\n".join(texts)[-MAX_ANSWER_CHARS:]


def _answers_block(answers: list[PanelAnswer]) -> str:
    return "\n\n".join(
        f"--- Panelist {index} ({a.model}) ---\n{a.text[:MAX_ANSWER_CHARS]}" for index, a in enumerate(answers, start=1)
    )


def analysis_parse(text: str) -> dict | None:
    """The analyst's JSON object with the five keys (missing keys as []), None when it sent no object."""
    try:
        value = json.loads(text)
    except ValueError:
        try:  # json-repair is not linear in the worst case: bounded in a child process (plugins.healing)
            value = repair_bounded(text)
        except Exception:  # no JSON found, out of time, or anything else a model's text provokes
            return None
    if not isinstance(value, dict) or not any(key in value for key in ANALYSIS_KEYS):
        return None
    return {key: value.get(key) or [] for key in ANALYSIS_KEYS}


def fusion_stage(
    request: CanonicalRequest, ctx: RequestContext, *, options: dict, limits: tuple[RoutingLimit, ...]
) -> Staged | Block:
    preset_name = options.get("preset") or DEFAULT_PRESET
    preset = presets().get(preset_name) or DEFAULT_PRESETS[DEFAULT_PRESET]
    panel = list(dict.fromkeys(options.get("analysis_models") or preset))
    analyst = options.get("model") or preset[0]
    for model in (*panel, analyst):
        if model == "gateway/fusion":
            return Block(MSG_RECURSION.format(model=model), status=400)
        if model in ROUTER_SLUGS:
            return Block(MSG_ROUTER_MEMBER.format(model=model), status=400)
    tools = options.get("tools")
    if tools:
        return Block(MSG_TOOLS.format(types=", ".join(sorted({t["type"] for t in tools}))), status=400)
    panel_request = replace(request, stream=False, tools=(), tool_choice=None, parallel_tool_calls=None)
    plans = {model: _plan(model, limits) for model in (*panel, analyst)}
    if isinstance(plans[analyst], GatewayError):  # refused before any paid call: the analyst writes the answer
        error = plans[analyst]
        assert isinstance(error, GatewayError)
        return Block(f"fusion analyst {analyst}: {error.message}", status=error.status)
    worst = worst_cost(panel_request, [plans[model] for model in panel], plans[analyst])
    if worst > spendable(ctx):  # the panel runs before the request's hold: it must be affordable first
        return Block(MSG_CREDITS.format(cost=worst), status=402)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(panel), thread_name_prefix="fusion-panel") as pool:
        answers = list(pool.map(lambda model: _call(model, panel_request, plans[model]), panel))
    panel_ms = _ms(started)
    served = [a for a in answers if a.status == "completed"]
    cost = sum((a.cost for a in answers), Decimal(0))
    data: dict = {
        "preset": None if options.get("analysis_models") else preset_name,
        "panel": [a.as_entry() for a in answers],
        "panel_ms": panel_ms,
        "analyst": analyst,
        "tools": [],
    }
    if not served:  # as a plain request to the first panel model: its error (or its answer, if it recovered)
        data["fallback"] = f"every panel model failed: the request went to {panel[0]} as a plain request"
        entry = StageEntry("request_plugin", "fusion", "all panel models failed", data=data, cost_usd=cost)
        return Staged(
            request=request,
            models=(panel[0],),
            strategy="fusion",
            entries=(entry,),
            cost_usd=cost,
            record={"router": _record(answers, analyst, cost, analysis_status="skipped")},
        )
    analysis_request = CanonicalRequest(
        model="",
        instructions=ANALYST_INSTRUCTIONS,
        input=(
            Message(
                role="user",
                content=(TextPart(f"Request:\n{_question(request)}\n\nAnswers:\n{_answers_block(served)}"),),
            ),
        ),
        text_format={"type": "json_object"},
        temperature=0,
    )
    review = _call(analyst, analysis_request, plans[analyst])
    cost += review.cost
    analysis = analysis_parse(review.text) if review.status == "completed" else None
    analysis_status = "completed" if analysis is not None else review.status if review.error else "unparsed"
    data["analysis"] = {
        "status": analysis_status,
        "provider": review.provider,
        "tokens": {"input": review.input_tokens, "output": review.output_tokens},
        "cost_usd": float(review.cost),
        **({"error": review.error} if review.error else {}),
        **({"result": analysis} if analysis is not None else {}),
    }
    analysis_text = json.dumps(analysis, ensure_ascii=False) if analysis is not None else "(no analysis available)"
    instructions = (
        f"{request.instructions}\n\n" if request.instructions else ""
    ) + f"{WRITER_INSTRUCTIONS}\n\nPanel answers:\n{_answers_block(served)}\n\nAnalysis (JSON):\n{analysis_text}"
    failed = len(answers) - len(served)
    summary = f"{len(served)} of {len(answers)} panel answers" + (f" ({failed} failed)" if failed else "")
    entry = StageEntry("request_plugin", "fusion", summary + f"; final answer by {analyst}", data=data, cost_usd=cost)
    return Staged(
        request=replace(request, instructions=instructions),
        models=(analyst,),
        strategy="fusion",
        entries=(entry,),
        cost_usd=cost,
        record={"router": _record(answers, analyst, cost, analysis_status=analysis_status)},
    )


def _record(answers: list[PanelAnswer], analyst: str, cost: Decimal, *, analysis_status: str) -> dict:
    """For the generation record: statuses, tokens and costs only (never answer text)."""
    return {
        "strategy": "fusion",
        "plugin": "fusion",
        "panel": [{k: v for k, v in a.as_entry().items() if k != "error"} for a in answers],
        "analyst": analyst,
        "analysis": analysis_status,
        "chosen": analyst,
        "cost_usd": float(cost),
    }
