"""The model slug `gateway/fusion` (a router pre-stage: plugins.routers): the panel runs, then the final answer is
written by the analyst as the request's own routed call, its instructions carrying the panel answers and the
analysis."""

from dataclasses import replace
from functools import partial
from typing import Any

from gateway.billing.services import ReservationHandle, SpendCapExceeded
from gateway.errors import GatewayError
from plugins.common.caller import request_params
from plugins.common.hosted_tools import capable_endpoints
from plugins.common.tool_loop import Refused, drain
from plugins.fusion.analysis import writer_instructions
from plugins.fusion.costs import final_hold, panel_hold, worst_cost
from plugins.fusion.panel import Fused, Meter, Panel, member_plans, panel_settings
from plugins.fusion.run import fuse, panel_scan
from routing.canonical import CanonicalRequest
from routing.limits import RoutingLimit
from routing.side_calls import (
    CallerPricing,
    call_charge,
)
from routing.stages import (
    Block,
    RequestContext,
    Staged,
    StageEntry,
)

MSG_CREDITS = (
    "Insufficient credits for the fusion panel, analysis and final answer: they can cost up to {cost:.6f} USD; add "
    "credits or set max_output_tokens lower"
)
MSG_RECURSION_TOOL = (
    "fusion: the model gateway/fusion cannot be given the gateway:fusion tool (a fusion run cannot start another)"
)
MSG_PARAM = "fusion: the panel model {model} cannot honour the request's {param}: {why}"
MSG_HOSTED = (
    "{source}: the tool type '{type}' is not available for the fusion analyst {analyst}, which writes the final "
    "answer: {why}"
)


def fusion_stage(
    request: CanonicalRequest, ctx: RequestContext, *, options: dict[str, Any], limits: tuple[RoutingLimit, ...]
) -> Staged | Block:
    panel = panel_settings(options)
    if isinstance(panel, str):
        return Block(panel, status=400)
    if any(tool.name == "gateway_fusion" for tool in request.tools):
        return Block(MSG_RECURSION_TOOL, status=400)
    params = request_params(request)  # each member gets them (the analyst too: it writes the final answer)
    plans = member_plans(ctx, panel, limits, params)
    for model, plan in plans.items():  # a member that cannot honour them: refused before any paid call
        if isinstance(plan, GatewayError) and (param := plan.metadata.get("param")) in params:
            return Block(
                MSG_PARAM.format(model=model, param=param, why=plan.message), status=400, metadata={"param": param}
            )
    analyst_plan = plans[panel.analyst]
    if isinstance(analyst_plan, GatewayError):  # refused before any paid call: the analyst writes the answer
        return Block(f"fusion analyst {panel.analyst}: {analyst_plan.message}", status=analyst_plan.status)
    if request.hosted_tools and not (capable := capable_endpoints([panel.analyst], request.hosted_tools)).endpoint_ids:
        # the final answer is the analyst's: refused now, before the panel is paid for (plugins.common.hosted_tools)
        tool = request.hosted_tools[max(capable.index, 0)]
        message = MSG_HOSTED.format(
            source=tool.source, type=tool.spec.get("type"), analyst=panel.analyst, why=capable.why
        )
        return Block(message, status=400, metadata={"param": tool.source})
    # the members answer without the provider-run tools (their endpoints were not chosen for them; the panel's own
    # `tools` search), the final answer runs them
    panel_request = replace(request, tools=(), tool_choice=None, hosted_tools=())
    final = final_hold(request, ctx, panel)
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
        return _fused(
            request, panel, drain(fuse(panel_request, panel, plans, meter, panel_scan(ctx, panel))), meter, hold
        )
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
    instructions = writer_instructions(request, fused.served, fused.analysis)
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
