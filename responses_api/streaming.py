"""The streaming side of POST /responses: open an upstream stream through the attempt engine (it falls back
while nothing was sent), relay it as Responses events with keep-alives, fail in band after the first byte,
and bill what was generated however the stream ends (one settlement, with its record). A request whose only
post-stage is the server-tool loop is relayed live: the loop runs while its rounds and tool calls stream."""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import cast

from django.conf import settings

from responses_api import stages
from responses_api.errors import final_error
from responses_api.render import failure_error
from responses_api.run import ResponseRun, Settled, response_abandon
from responses_api.stream_render import DONE, KEEPALIVE, StreamRenderer
from routing.attempts import WAITING, AttemptsFailed, AttemptStream, release_db_connection
from routing.canonical import CanonicalResponse
from routing.errors import ErrorType, UpstreamError
from routing.stages import LiveStage, StageBlocked, ToolEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    """How a stream ended when it was not served to completion: the error that ended it, or the client left."""

    error: UpstreamError | None = None
    cancelled: bool = False


def response_open_stream(*, run: ResponseRun) -> Iterator[bytes]:
    """Open an upstream stream before answering (errors are still HTTP errors here), then stream."""
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


def _stream_body(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer) -> Iterator[bytes]:
    outcome = StreamOutcome()
    release_db_connection()  # the relay may last minutes: hand the connection back meanwhile
    try:
        opening = [KEEPALIVE]
        if run.prepared.data.get("debug", {}).get("echo_upstream_body"):
            opening.append(renderer.debug(stream.upstream_body))
        shell = run.shell.render(status="in_progress")
        opening.append(renderer.lifecycles(("response.created", "response.in_progress"), shell))
        yield b"".join(opening)
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
        yield DONE
    except GeneratorExit:
        outcome = replace(outcome, cancelled=True)
        raise
    finally:
        stream.close()
        if run.settled is None:  # not served to completion: bill what was generated
            _settle_unfinished(run, stream, outcome)
        release_db_connection()


def _relay(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer) -> Iterator[bytes]:
    # A post-stage sees the whole answer before the client does: then the steps are kept (the fold has them)
    # and only keep-alives go out until the stages passed it; the server-tool loop alone runs live.
    wanted = stages.wanted_post_stages(run.ctx)
    if len(wanted) == 1 and hasattr(wanted[0], "live"):
        yield from _relay_live(run, stream, renderer, cast(LiveStage, wanted[0]))
        return
    buffered = bool(wanted)
    # Whatever read the database since the upstream call began (a cached version check) must not keep a pooled
    # connection for the whole stream: a burst of streams would exhaust the pool.
    release_db_connection()
    interval = settings.STREAM_KEEPALIVE_SECONDS
    written = time.monotonic()
    for steps in stream.events():
        if not isinstance(steps, list):
            yield KEEPALIVE
        elif not buffered:
            yield renderer.render(steps)  # the events one upstream event becomes, as one write
        elif time.monotonic() - written >= interval:
            written = time.monotonic()
            yield KEEPALIVE
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
    yield closing + renderer.lifecycle(kind, result)


def _relay_live(run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer, stage: LiveStage) -> Iterator[bytes]:
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
                yield KEEPALIVE
            elif isinstance(event, ToolEvent):
                if event.phase == "done":  # a tool that read the database (a fusion call's credit check)
                    release_db_connection()  # does not keep a pooled connection while the stream goes on
                yield renderer.tool_event(event)
            else:
                yield renderer.render(cast(list, event))
    finally:
        loop.close()  # a round cut short (the client left) is counted before the settlement
    run.pipeline += restaged.entries
    run.record.update(stages.record_merge(run.record, restaged.record))
    response = restaged.response
    settled = _settle_served(run, response, stream)
    result = run.result(response, served=stream.candidate, items=renderer.items, settled=settled)
    yield renderer.lifecycle("response.incomplete" if response.status == "incomplete" else "response.completed", result)


def _ttft_ms(run: ResponseRun, stream: AttemptStream) -> int | None:
    if stream.first_content_at is None:
        return None
    return int((stream.first_content_at - run.started) * 1000)


def _fail_in_band(
    run: ResponseRun, stream: AttemptStream, renderer: StreamRenderer, error: UpstreamError
) -> Iterator[bytes]:
    """After the 200 went out: a flat `error` event, then `response.failed`."""
    gateway_error = final_error(error, attempts=run.attempts, gateway_metadata=None)
    if renderer.content_started:  # what was sent is closed (a buffered answer sent nothing)
        yield renderer.render(stream.fold.close())
    masked = error.error_type in (ErrorType.SERVER, "unmapped")  # a server error's details stay ours
    provider = stream.candidate.endpoint.provider_name
    yield _failed(
        run, renderer, error.error_type, gateway_error.message, provider, None if masked else error.provider_code
    )


def _blocked_in_band(run: ResponseRun, renderer: StreamRenderer, blocked: StageBlocked) -> Iterator[bytes]:
    """A post-stage refused a streamed answer: nothing of it was sent; the refusal ends the stream."""
    yield _failed(run, renderer, blocked.error_type, blocked.message)


def _failed(
    run: ResponseRun,
    renderer: StreamRenderer,
    error_type: str,
    message: str,
    provider: str | None = None,
    provider_code: str | None = None,
) -> bytes:
    """`error` then `response.failed`; the provider that failed and its own error code (not for a server error)
    ride along for the front doors that show them (the Chat Completions error chunk)."""
    body = failure_error(error_type, message)
    failed = run.shell.render(
        status="failed",
        model=run.plan.requested,
        output=renderer.items,
        error=body,
        error_type=error_type,
        metadata=run.metadata(),
    )
    if provider:
        failed["provider"] = provider
    if provider_code:
        failed["provider_code"] = provider_code
    return renderer.error(code=body["code"], message=body["message"]) + renderer.lifecycle("response.failed", failed)


def _settle_served(run: ResponseRun, response: CanonicalResponse, stream: AttemptStream) -> Settled:
    """The answer was generated: billed as served (a post-stage's refusal too, as on the JSON path)."""
    assert run.served is not None
    return run.close(
        status=response.status,
        served=run.served,
        usage=response.usage,
        upstream_id=response.upstream_id,
        finish_reason=response.incomplete_reason or "stop",
        ttft_ms=_ttft_ms(run, stream),
    )


def _settle_unfinished(run: ResponseRun, stream: AttemptStream, outcome: StreamOutcome) -> None:
    """A failed, cut or cancelled stream: bill what was generated (reported or estimated, within the request's
    limits) to the endpoint that generated it, or give the hold back; record the generation, once."""
    error, cancelled = outcome.error, outcome.cancelled
    try:
        response = stream.fold.response()
        usage = run.bound_usage(response, stream.candidate)
        run.close(
            status="cancelled" if cancelled else "failed",
            served=stream.candidate if usage.output_tokens or usage.web_search_requests else None,
            usage=usage,
            error_type=error.error_type if error else "",
            cancelled=cancelled,
            upstream_id=response.upstream_id,
            ttft_ms=_ttft_ms(run, stream),
            finish_reason="cancelled" if cancelled else "error",
        )
    except Exception:
        logger.exception("could not settle stream %s", run.generation_id)
