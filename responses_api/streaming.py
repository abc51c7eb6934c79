"""The streaming side of POST /responses: open an upstream stream (falling back while nothing was sent),
relay it as Responses events with keep-alives, fail in band after the first byte, and bill what was
generated however the stream ends."""

import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings

from gateway.billing import services as credits
from responses_api.errors import final_error
from responses_api.render import failure_error
from responses_api.service import ResponseRun, release_db_connection, response_abandon
from responses_api.stream_render import DONE, KEEPALIVE, StreamRenderer
from routing import upstream
from routing.accumulate import Accumulator
from routing.canonical import CanonicalResponse, Finished, ResponseStarted, Usage, UsageReported
from routing.errors import UpstreamError
from routing.selection import Candidate

logger = logging.getLogger(__name__)
NOT_CONTENT = (ResponseStarted, UsageReported, Finished)


@dataclass
class OpenedStream:
    candidate: Candidate
    stream: upstream.UpstreamStream
    upstream_body: dict
    started: float


def _open_next(run: ResponseRun) -> tuple[OpenedStream | None, UpstreamError | None]:
    """Open the next candidate that answers with 200; (None, last error) when none is left or one failed for good."""
    release_db_connection()
    last_error = None
    for candidate in run.candidates_left():
        started = time.monotonic()
        try:
            request = run.upstream_request(candidate)
            opened = upstream.open_stream(endpoint=candidate.endpoint, upstream=request)
        except UpstreamError as error:
            run.record_attempt(candidate, started, error)
            last_error = error
            if not error.retryable:
                return None, error
            continue
        return OpenedStream(candidate=candidate, stream=opened, upstream_body=request.body, started=started), None
    return None, last_error


def response_open_stream(*, run: ResponseRun) -> Iterator[bytes]:
    """Open an upstream stream before answering (errors are still HTTP errors here), then stream."""
    try:
        opened, error = _open_next(run)
    except Exception:
        response_abandon(run)
        raise
    if opened is None:
        raise run.fail(error)
    return _stream_body(run, opened)


def _until_first_content(events: Iterator, interval: float) -> Iterator[object]:
    """Pull upstream events in a helper thread until the first content event (or the end), yielding
    KEEPALIVE while waiting and ("event", e) for each event; the caller then reads `events` itself.
    The helper stops before the caller resumes, so the iterator is never used by two threads at once."""
    box: queue.Queue = queue.Queue()

    def pull():
        try:
            for event in events:
                box.put(("event", event))
                if not isinstance(event, NOT_CONTENT):
                    break
            else:
                box.put(("end", None))
                return
            box.put(("first", None))
        except BaseException as exc:  # handed over to the generator's thread
            box.put(("error", exc))

    threading.Thread(target=pull, name="first-content", daemon=True).start()
    while True:
        try:
            kind, value = box.get(timeout=interval)
        except queue.Empty:
            yield KEEPALIVE
            continue
        if kind == "error":
            raise value
        if kind == "event":
            yield ("event", value)
            continue
        yield (kind, None)  # "first" (content has begun) or "end" (the upstream finished)
        return


def _stream_body(run: ResponseRun, opened: OpenedStream) -> Iterator[bytes]:
    renderer = StreamRenderer()
    accumulator = Accumulator()
    outcome = {"status": "failed", "error": None, "cancelled": False, "ttft_ms": None}
    interval = settings.STREAM_KEEPALIVE_SECONDS
    release_db_connection()  # the relay may last minutes: hand the connection back meanwhile
    try:
        opening = [KEEPALIVE]
        if run.prepared.data.get("debug", {}).get("echo_upstream_body"):
            opening.append(renderer.debug(opened.upstream_body))
        shell = run.shell.render(status="in_progress")
        opening += [renderer.lifecycle("response.created", shell), renderer.lifecycle("response.in_progress", shell)]
        yield b"".join(opening)
        try:
            while opened is not None:
                try:
                    yield from _relay(run, opened, renderer, accumulator, outcome, interval)
                    break
                except UpstreamError as error:
                    run.record_attempt(opened.candidate, opened.started, error)
                    opened.stream.close()
                    if renderer.content_started or not error.retryable:
                        outcome["error"] = error
                        break
                    accumulator = Accumulator()
                    opened, next_error = _open_next(run)
                    if opened is None:
                        outcome["error"] = next_error or error
        except Exception:  # our own failure mid-stream: still end the stream properly
            logger.exception("stream %s failed unexpectedly", run.generation_id)
            outcome["error"] = UpstreamError(error_type="server", message="Internal server error", retryable=False)
        if outcome["error"] is not None:
            yield from _fail_in_band(run, renderer, outcome["error"])
        yield DONE
    except GeneratorExit:
        outcome["cancelled"] = True
        raise
    finally:
        if opened is not None:
            opened.stream.close()
        _finish_stream(run, accumulator, outcome)
        release_db_connection()


def _relay(run, opened, renderer, accumulator, outcome, interval) -> Iterator[bytes]:
    outcome["candidate"] = opened.candidate
    events = opened.stream.events()
    ended = False
    for item in _until_first_content(events, interval):
        if item is KEEPALIVE:
            yield KEEPALIVE
        elif item[0] == "event":
            chunk = _feed(run, renderer, accumulator, outcome, item[1])
            if chunk:
                yield chunk
        else:
            ended = item[0] == "end"
    if not ended:
        for event in events:
            chunk = _feed(run, renderer, accumulator, outcome, event)
            if chunk:
                yield chunk
    if not accumulator.has_output() and accumulator.finished is None:
        raise UpstreamError(error_type="provider_unavailable", message="The provider's stream had no output",
                            retryable=True)
    # The upstream finished: close the last item and complete.
    response = accumulator.response()
    response = replace(response, usage=run.bound_usage(response.usage, opened.candidate))
    first_token = (run.started + outcome["ttft_ms"] / 1000 - opened.started) if outcome["ttft_ms"] else None
    run.record_attempt(opened.candidate, opened.started, None, usage=response.usage, ttft_s=first_token)
    run.served = opened.candidate
    run.remember_session()
    closing = b"".join(renderer.close_open())
    charged, list_cost = run.settle(response.usage)
    outcome.update(status=response.status, charged=charged, list_cost=list_cost, settled=True, usage=response.usage)
    result = run.result(response, items=renderer.items, charged=charged, list_cost=list_cost)
    kind = "response.incomplete" if response.status == "incomplete" else "response.completed"
    yield closing + renderer.lifecycle(kind, result)


def _feed(run, renderer, accumulator, outcome, event) -> bytes:
    """The events one upstream event becomes, as one write (fewer syscalls per stream)."""
    if outcome["ttft_ms"] is None and not isinstance(event, NOT_CONTENT):
        outcome["ttft_ms"] = int((time.monotonic() - run.started) * 1000)
    accumulator.add(event)
    return b"".join(renderer.feed(event))


def _fail_in_band(run: ResponseRun, renderer: StreamRenderer, error: UpstreamError) -> Iterator[bytes]:
    """After the 200 went out: a flat `error` event, then `response.failed`."""
    gateway_error = final_error(error, attempts=run.attempts, gateway_metadata=None)
    body = failure_error(error.error_type, gateway_error.message)
    yield from renderer.close_open()
    yield renderer.error(code=body["code"], message=body["message"])
    failed = run.shell.render(status="failed", model=run.plan.requested, output=renderer.items, error=body,
                              error_type=error.error_type, metadata=run.metadata())
    yield renderer.lifecycle("response.failed", failed)


def _finish_stream(run: ResponseRun, accumulator: Accumulator, outcome: dict) -> None:
    """Bill what was generated (also on a cut or a client disconnect) and record the generation, once."""
    try:
        response = accumulator.response()
        if outcome.get("settled"):
            run.write_generation(status=outcome["status"], usage=outcome["usage"], cost=outcome["charged"],
                                 upstream_cost=outcome["list_cost"], upstream_id=response.upstream_id,
                                 finish_reason=response.incomplete_reason or "stop", ttft_ms=outcome["ttft_ms"])
            return
        usage = _usage_so_far(response, estimated_input=run.prepared.estimated_input_tokens)
        charged = list_cost = Decimal(0)
        if outcome.get("candidate") is not None:  # reported or estimated, within the request's limits
            usage = run.bound_usage(usage, outcome["candidate"])
        if usage.output_tokens and outcome.get("candidate") is not None:
            run.served = outcome["candidate"]  # it generated these tokens: they are billed
            charged, list_cost = run.settle(usage)
        else:
            credits.credits_release(reservation=run.reservation)
        error = outcome.get("error")
        run.write_generation(
            status="cancelled" if outcome["cancelled"] else "failed", usage=usage, cost=charged,
            upstream_cost=list_cost, error_type=error.error_type if error else "", cancelled=outcome["cancelled"],
            upstream_id=response.upstream_id, ttft_ms=outcome["ttft_ms"],
            finish_reason="cancelled" if outcome["cancelled"] else "error",
        )
    except Exception:
        logger.exception("could not settle stream %s", run.generation_id)


def _usage_so_far(response: CanonicalResponse, *, estimated_input: int) -> Usage:
    """The upstream's usage when it reported one; otherwise an estimate from the text generated so far."""
    if response.usage.output_tokens > 0:
        return response.usage
    generated = sum(len(getattr(item, "text", "") or getattr(item, "arguments", "") or "") for item in response.output)
    generated += sum(len(text) for item in response.output for text in getattr(item, "summary", ()) +
                     getattr(item, "content", ()))
    if not generated:
        return response.usage
    return replace(response.usage, output_tokens=max(1, generated // 4),
                   input_tokens=response.usage.input_tokens or estimated_input)
