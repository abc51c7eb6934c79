"""The life of one POST /responses request, top to bottom, for a JSON answer and a stream. Each step is one call;
the modules named do it.

authenticate (gateway.accounts, by the view's permission) -> validate (responses_api.validation) -> normalize
to the canonical request (responses_api.normalize) -> pre-stages (responses_api.stages: guardrails, request
plugins) -> plan (routing.selection) -> hold credits (gateway.billing) -> run attempts (routing.attempts, the
one fallback loop) -> post-stages (response plugins, server-tool loop) -> settle + record (ResponseRun.close:
gateway.billing's generation_settle, one transaction) -> render (responses_api.render for JSON; for a stream,
`respond_stream` below relays the events through responses_api.stream_render)."""

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import cast

from django.conf import settings
from rest_framework.request import Request

from gateway.accounts.authentication import Caller
from gateway.errors import GatewayError
from responses_api import stages
from responses_api.errors import final_error
from responses_api.metadata import metadata_headers_check, metadata_requested
from responses_api.normalize import Prepared, reestimated
from responses_api.own_hold import response_own_hold
from responses_api.render import output_items
from responses_api.run import ResponseRun, Settled, response_abandon
from responses_api.service import (
    error_metadata,
    response_charge_checks,
    response_hold,
    response_normalize,
    response_plan,
)
from responses_api.stream_render import DONE_WRITE, KEEPALIVE, KEEPALIVE_WRITE, StreamRenderer, Write
from responses_api.validation.request import ResponseCreateRequestSerializer
from routing.attempts import WAITING, AttemptsFailed, AttemptStream, release_db_connection
from routing.canonical import CanonicalResponse
from routing.errors import ErrorType, UpstreamError
from routing.pricing_usage import usage_add
from routing.stages import (
    Block,
    LiveStage,
    PreStage,
    RequestContext,
    StageBlocked,
    Staged,
    StageEntry,
    ToolEvent,
)

logger = logging.getLogger(__name__)


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


# ---- the stream: the same steps, as a generator of writes (the events of each) ---------------------------------------


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    """How a stream ended when it was not served to completion: the error that ended it, or the client left."""

    error: UpstreamError | None = None
    cancelled: bool = False


def respond_stream(run: ResponseRun) -> Iterator[Write]:
    """run attempts (the first 200 before answering: errors are still HTTP errors here) -> relay -> post-stages ->
    settle + record -> the Responses events of each write, keep-alives and the end among them (the door frames
    them: responses_api.streaming). With post-stages configured the answer is relayed once they passed it (keep-alives
    meanwhile)."""
    renderer = StreamRenderer()
    try:
        stream = run.sequence.open_stream(
            keepalive_interval=settings.STREAM_KEEPALIVE_SECONDS, committed=lambda: renderer.content_started
        )
    except AttemptsFailed as failed:
        raise run.fail(failed.error) from None
    except Exception:
        response_abandon(run)
        raise
    return _stream_body(run, stream, renderer)


def _stream_body(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer) -> Iterator[Write]:
    outcome = StreamOutcome()
    release_db_connection()  # the relay may last minutes: hand the connection back meanwhile
    try:
        opening: list = [KEEPALIVE]
        if run.prepared.data.get("debug", {}).get("echo_upstream_body"):
            opening.append(renderer.debug(stream.upstream_body))
        shell = run.shell.render(status="in_progress")
        opening += renderer.lifecycles(("response.created", "response.in_progress"), shell)
        yield opening
        refused: StageBlocked | None = None
        try:
            yield from _relay(run, stream, renderer)
        except StageBlocked as blocked:  # the guardrails refused a server tool's result (plugins.server_tools)
            refused = blocked
            outcome = StreamOutcome(error=UpstreamError(blocked.error_type, blocked.message, retryable=False))
        except UpstreamError as error:
            outcome = StreamOutcome(error=error)
        except Exception:  # our own failure mid-stream: still end the stream properly
            logger.exception("stream %s failed unexpectedly", run.generation_id)
            outcome = StreamOutcome(
                error=UpstreamError(error_type=ErrorType.SERVER, message="Internal server error", retryable=False)
            )
        if refused is not None:
            yield from _blocked_in_band(run, renderer, refused)
        elif outcome.error is not None:
            yield from _fail_in_band(run, stream, renderer, outcome.error)
        yield DONE_WRITE
    except GeneratorExit:
        outcome = replace(outcome, cancelled=True)
        raise
    finally:
        stream.close()
        if run.settled is None:  # not served to completion: bill what was generated
            _settle_unfinished(run, stream, outcome)
        release_db_connection()


def _relay(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer) -> Iterator[Write]:
    # A post-stage sees the whole answer before the client does: then the steps are kept (the fold has them)
    # and only keep-alives go out until the stages passed it; the server-tool loop alone runs live.
    wanted = stages.wanted_post_stages(run.ctx)
    if (live := stages.live_stage(wanted)) is not None:
        yield from _relay_live(run, stream, renderer, live)
        return
    buffered = bool(wanted)
    # Whatever read the database since the upstream call began (a cached version check) must not keep a pooled
    # connection for the whole stream: a burst of streams would exhaust the pool.
    release_db_connection()
    interval = settings.STREAM_KEEPALIVE_SECONDS
    written = time.monotonic()
    for steps in stream.events():
        if not isinstance(steps, list):
            yield KEEPALIVE_WRITE
        elif not buffered:
            yield renderer.render(steps)  # the events one upstream event becomes, as one write
        elif time.monotonic() - written >= interval:
            written = time.monotonic()
            yield KEEPALIVE_WRITE
    # The upstream finished: close the last item (or replay the checked answer), settle and record, complete.
    response = stream.response
    assert response is not None and run.served is not None
    if buffered:
        try:
            response = stages.post_stages(response, run.ctx, run.pipeline, run.record)
        except StageBlocked as blocked:
            _settle_served(run, response, stream)
            yield from _blocked_in_band(run, renderer, blocked)
            return
        closing = renderer.replay(response)
    else:
        closing = renderer.render(stream.fold.close())
    settled = _settle_served(run, response, stream)
    result = run.result(response, served=run.served, items=renderer.items, settled=settled)
    kind = "response.incomplete" if response.status == "incomplete" else "response.completed"
    yield [*closing, renderer.lifecycle(kind, result)]


def _relay_live(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer, stage: LiveStage) -> Iterator[Write]:
    """The server-tool loop as it runs (plugins.server_tools): each round's events as they arrive from upstream,
    each call's item and progress events as it runs; then settle and complete. A later round's failure is raised
    (UpstreamError: failed in band)."""
    release_db_connection()
    loop = stage.live(stream, run.ctx)
    try:
        while True:
            try:
                event = next(loop)
            except StopIteration as stop:
                restaged = stop.value
                break
            if event is WAITING:
                yield KEEPALIVE_WRITE
            elif isinstance(event, ToolEvent):
                if event.phase == "done":  # a tool that read the database (a fusion call's credit check)
                    release_db_connection()  # does not keep a pooled connection while the stream goes on
                yield [renderer.tool_event(event)]
            else:
                yield renderer.render(cast(list, event))
    finally:
        loop.close()  # a round cut short (the client left) is counted before the settlement
    run.pipeline += restaged.entries
    run.record.update(stages.record_merge(run.record, restaged.record))
    response = restaged.response
    settled = _settle_served(run, response, stream)
    result = run.result(response, served=stream.candidate, items=renderer.items, settled=settled)
    yield [
        renderer.lifecycle("response.incomplete" if response.status == "incomplete" else "response.completed", result)
    ]


def _ttft_ms(run: ResponseRun, stream: AttemptStream) -> int | None:
    if stream.first_content_at is None:
        return None
    return int((stream.first_content_at - run.started) * 1000)


def _fail_in_band(
    run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer, error: UpstreamError
) -> Iterator[Write]:
    """After the 200 went out: a flat `error` event, then `response.failed`."""
    gateway_error = final_error(error, attempts=run.attempts, gateway_metadata=None)
    if renderer.content_started:  # what was sent is closed (a buffered answer sent nothing)
        yield renderer.render(stream.fold.close())
    masked = error.error_type in (ErrorType.SERVER, "unmapped")  # a server error's details stay ours
    provider = stream.candidate.endpoint.provider_name
    yield _failed(run, renderer, error.error_type, gateway_error.message, provider, error.provider_code, masked)


def _blocked_in_band(run: ResponseRun, renderer: StreamRenderer, blocked: StageBlocked) -> Iterator[Write]:
    """A post-stage refused a streamed answer: nothing of it was sent; the refusal ends the stream."""
    yield _failed(run, renderer, blocked.error_type, blocked.message)


def _failed(
    run: ResponseRun,
    renderer: StreamRenderer,
    error_type: str,
    message: str,
    provider: str | None = None,
    provider_code: str | None = None,
    masked: bool = False,
) -> Write:
    return renderer.failure(
        run.shell,
        error_type=error_type,
        message=message,
        model=run.plan.requested,
        metadata=run.metadata(),
        provider=provider,
        provider_code=None if masked else provider_code,
    )


def _settle_served(run: ResponseRun, response: CanonicalResponse, stream: AttemptStream) -> Settled:
    """The answer was generated: billed as served (a post-stage's refusal too, as on the JSON path)."""
    assert run.served is not None
    ttft_ms = _ttft_ms(run, stream)
    return run.close(
        status=response.status,
        served=run.served,
        usage=response.usage,
        upstream_id=response.upstream_id,
        finish_reason=response.incomplete_reason or "stop",
        ttft_ms=ttft_ms,
    )


def _settle_unfinished(run: ResponseRun, stream: AttemptStream, outcome: StreamOutcome) -> None:
    """A failed, cut or cancelled stream: bill what was generated (reported or estimated, within the request's
    limits) to the endpoint that generated it, or give the hold back; record the generation, once."""
    error, cancelled = outcome.error, outcome.cancelled
    try:
        ttft_ms = _ttft_ms(run, stream)
        response = stream.fold.response()
        usage = run.bound_usage(response, stream.candidate)
        run.close(
            status="cancelled" if cancelled else "failed",
            served=stream.candidate if usage.output_tokens or usage.web_search_requests else None,
            usage=usage,
            error_type=error.error_type if error else "",
            cancelled=cancelled,
            upstream_id=response.upstream_id,
            ttft_ms=ttft_ms,
            finish_reason="cancelled" if cancelled else "error",
        )
    except Exception:
        logger.exception("could not settle stream %s", run.generation_id)
