"""The server tool `gateway:fusion`: the model asks a fusion panel a question; the analysis and the answers are
the tool result it reads, the call an output item of its own type. plugins.registry registers it among the server
tools' runners (plugins.common.tools.RUNNERS) when the app is ready: the server-tool loop never imports fusion."""

from collections.abc import Generator
from functools import partial
from typing import Any

from gateway.billing.services import SpendCapExceeded, holds_drop
from gateway.errors import GatewayError
from plugins.common.caller import caller_limits
from plugins.common.tools import ToolContext, ToolResult, as_json, new_item_id
from plugins.fusion.analysis import MAX_ANSWER_CHARS, question_text
from plugins.fusion.costs import panel_hold, worst_cost
from plugins.fusion.panel import DEFAULT_OUTPUT_TOKENS, Meter, member_plans, panel_settings
from plugins.fusion.run import fuse, panel_scan
from routing.canonical import CanonicalRequest, Message, TextPart
from routing.side_calls import (
    CallerPricing,
)
from routing.stages import (
    ServerToolItem,
    StageEntry,
)

MSG_TOOL_CREDITS = "Insufficient credits for the fusion panel and analysis: they can cost up to {cost:.6f} USD"


def fusion_tool_run(
    args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext
) -> Generator[dict[str, Any] | None, None, ToolResult]:
    """The model's question to a fusion panel: the analysis and the answers are what it reads; the call's item
    has the analysis, each answer, the failed members and the pages the panel read."""
    kind = "gateway:fusion"
    ctx = tools.ctx
    assert ctx is not None, "gateway:fusion runs within a request"
    prompt = str(args.get("prompt") or args.get("query") or "").strip() or (
        question_text(ctx.request) if ctx.request else ""
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
    plans = member_plans(ctx, panel, caller_limits(ctx))
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
        fused = yield from fuse(request, panel, plans, meter, panel_scan(ctx, panel))
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
    item: dict[str, Any] = {
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
    said: dict[str, Any] = {
        "analysis": fused.analysis,
        "answers": [{"model": a.model, "content": a.text[:share]} for a in fused.served],
    }
    return ToolResult(for_model=as_json(said), item=ServerToolItem(item=item), entry=entry)
