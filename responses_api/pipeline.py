"""The life of one POST /responses request, top to bottom. Each step is one call; the modules named do it.

authenticate (gateway.accounts, by the view's permission) -> validate (responses_api.validation) -> normalize
to the canonical request (responses_api.normalize) -> pre-stages (responses_api.stages: guardrails, request
plugins) -> plan (routing.selection) -> hold credits (gateway.billing) -> run attempts (routing.attempts, the
one fallback loop) -> post-stages (response plugins, server-tool loop) -> settle + record (gateway.billing's
generation_settle, one transaction) -> render (responses_api.render for JSON, responses_api.streaming for SSE).
"""

from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import cast

from rest_framework.request import Request

from gateway.accounts.authentication import Caller
from gateway.errors import GatewayError
from responses_api import stages
from responses_api.metadata import metadata_headers_check, metadata_requested
from responses_api.normalize import Prepared, reestimated
from responses_api.own_hold import response_own_hold
from responses_api.render import output_items
from responses_api.run import ResponseRun, response_abandon
from responses_api.service import (
    error_metadata,
    response_charge_checks,
    response_hold,
    response_normalize,
    response_plan,
)
from responses_api.streaming import response_open_stream
from responses_api.validation.request import ResponseCreateRequestSerializer
from routing.attempts import AttemptsFailed
from routing.pricing_usage import usage_add
from routing.stages import Block, PreStage, RequestContext, StageBlocked, Staged, StageEntry


def authenticate(request: Request, data: dict) -> RequestContext:
    """The caller (authenticated by the view's permission), its session for sticky routing, and whether it
    asked for gateway_metadata."""
    session_id = data.get("session_id") or request.META.get("HTTP_X_SESSION_ID", "")[:256]
    caller = cast(Caller, request.user)  # IsInferenceKey let only an inference key's caller through
    metadata_headers_check(request.META)
    return RequestContext(
        caller=caller,
        session_id=session_id,
        want_metadata=metadata_requested(request.META),
        plugins=tuple(data.get("plugins") or ()),
        stream=bool(data.get("stream")),
        provider=data.get("provider"),
    )


def validate(request: Request) -> dict:
    serializer = ResponseCreateRequestSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data: dict = serializer.validated_data
    return data


def prepare_run(*, ctx: RequestContext, data: dict) -> ResponseRun:
    """normalize -> pre-stages -> plan -> hold. Errors here are HTTP errors (with gateway_metadata if asked)."""
    data = stages.with_plugin_tools(data, ctx)
    with error_metadata(ctx=ctx, data=data) as planned:
        stages.refuse_unhonoured_plugins(list(ctx.plugins))
        stages.refuse_unhonoured_tools(data.get("tools") or [])
        stages.refuse_unknown_tool_choice(data)
        prepared = response_normalize(ctx=ctx, data=data)
        ctx = replace(ctx, models=tuple(prepared.models), suffix=prepared.suffix)
        ctx = replace(ctx, own_hold=partial(response_own_hold, ctx=ctx, prepared=prepared))  # asked by a fusion panel
        ctx = replace(ctx, result_scan=stages.tool_result_scan)  # a fusion panel member's tool results are scanned
        prepared, ran = pre_stages(prepared, ctx)
        ctx = replace(ctx, models=tuple(prepared.models), request=prepared.canonical, caps=prepared.caps)
        try:
            plan = response_plan(ctx=ctx, prepared=prepared)
            planned.append(plan)
            # the request's own hold takes over the pre-stages' (a fusion panel's) in the same transaction
            run = response_hold(ctx=ctx, prepared=prepared, plan=plan)
        except BaseException:  # nothing routable, or no credits: the paid calls that ran are still charged
            response_charge_checks(ctx=ctx, prepared=prepared, cost=prepared.stage_cost)
            raise
    run.pipeline += ran + stages.post_stage_notes(ctx)
    return run


def pre_stages(
    prepared: Prepared, ctx: RequestContext, configured: Sequence[PreStage] | None = None
) -> tuple[Prepared, list[StageEntry]]:
    """The pre-stages in order. Raises StageBlocked (with the entries so far) when one refuses the request;
    the routing limits, budgets, costs and record figures they set are kept on the prepared request. A stage that
    changed the request has its input re-estimated (a parsed file is text the hold must cover). `configured`: the
    stages to run when not all apply (POST /embeddings runs the guardrails only)."""
    ran: list[StageEntry] = []
    for stage in stages.PRE_STAGES if configured is None else configured:
        try:
            result = stage(prepared.canonical, ctx)
        except BaseException:  # what earlier stages' calls cost is charged (out of their holds), as on a block
            response_charge_checks(ctx=ctx, prepared=prepared, cost=prepared.stage_cost)
            raise
        if isinstance(result, Block):
            ran += result.entries or (StageEntry(type=stage.type, name=stage.name, outcome="blocked"),)
            error = result.error()
            error.pipeline = [entry.as_dict() for entry in ran]
            # The checks that ran before the refusal (an entity model, a moderation engine) cost money: charged,
            # out of the holds taken for them (the stage's own, earlier stages': a fusion panel's).
            refused = replace(prepared, holds=prepared.holds + result.holds)
            response_charge_checks(ctx=ctx, prepared=refused, cost=prepared.stage_cost + result.cost_usd)
            raise error
        if isinstance(result, Staged):
            if result.request is prepared.canonical and result.adds_nothing():
                continue  # what the fold below would make of it: the same prepared request, no entry
            ran += result.entries
            if result.models:  # a router chose: later stages and the plan see its models
                prepared = replace(prepared, models=list(result.models), strategy=result.strategy or "direct")
                ctx = replace(ctx, models=result.models)
            if result.caps:  # later stages' own model calls hold against the budgets too (a fusion panel)
                ctx = replace(ctx, caps=ctx.caps + result.caps)
            prepared = replace(
                reestimated(prepared, result.request),
                limits=prepared.limits + result.limits,
                caps=prepared.caps + result.caps,
                stage_cost=prepared.stage_cost + result.cost_usd,
                stage_usage=usage_add(prepared.stage_usage, result.usage),
                record=stages.record_merge(prepared.record, result.record),
                holds=prepared.holds + result.holds,
            )
            continue
        outcome = "passed" if result is prepared.canonical else "changed"
        ran.append(StageEntry(type=stage.type, name=stage.name, outcome=outcome))
        prepared = reestimated(prepared, result)
    return prepared, ran


def respond_json(run: ResponseRun) -> dict:
    try:
        return _respond_json(run)
    except GatewayError:
        raise
    except Exception:
        response_abandon(run)
        raise


def _respond_json(run: ResponseRun) -> dict:
    """run attempts -> post-stages -> settle + record -> render."""
    try:
        served = run.sequence.call()
    except AttemptsFailed as failed:
        raise run.fail(failed.error) from None
    blocked = None
    try:
        response = stages.post_stages(served.response, run.ctx, run.pipeline, run.record)
    except StageBlocked as refused:
        blocked, response = refused, served.response
    settled = run.close(
        status=response.status,
        served=served.candidate,
        usage=response.usage,
        finish_reason=response.incomplete_reason or "stop",
        upstream_id=response.upstream_id,
    )
    if blocked is not None:  # the tokens were generated: billed, then refused
        raise blocked
    return run.result(response, served=served.candidate, items=output_items(response), settled=settled)


def respond_stream(run: ResponseRun) -> Iterator[bytes]:
    """run attempts (the first 200 before answering) -> relay -> post-stages -> settle + record -> SSE. With
    post-stages configured the answer is relayed once they passed it (keep-alives meanwhile)."""
    return response_open_stream(run=run)
