"""A fusion run: the panel members in parallel (each through the attempt engine with its own endpoint fallback,
through the server-tool loop when it has tools), then the analysis; what each call spends counted on the run's
meter as it ends."""

import time
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from decimal import Decimal
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection

from gateway.errors import GatewayError
from plugins.common.tool_loop import Loop, Refused, usage_sum
from plugins.fusion.analysis import analysis_input, analysis_parse, analysis_request
from plugins.fusion.panel import Fused, Meter, Panel, PanelAnswer, member_request, round_input
from routing.attempts import AttemptSequence, AttemptsFailed, Served
from routing.canonical import CanonicalRequest, CanonicalResponse, OutputItem, OutputMessage, Usage
from routing.errors import ErrorType, UpstreamError
from routing.pricing import usage_cost
from routing.selection import Candidate, RoutePlan
from routing.side_calls import (
    bounded_usage,
    output_bound,
    sent_tokens,
)
from routing.stages import (
    RequestContext,
    ServerToolItem,
    ToolLoop,
    ToolResultScan,
)

T = TypeVar("T")


def _answer_text(output: tuple[OutputItem | ServerToolItem, ...]) -> str:
    """The member's answer: its messages after the last server tool call it made."""
    texts: list[str] = []
    for item in output:
        if isinstance(item, ServerToolItem):
            texts = []
        elif isinstance(item, OutputMessage):
            texts.append(item.text)
    return "".join(texts)


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
        held = round_input(first, done, output_bound(round_request, candidate.endpoint))
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


def panel_event(answer: PanelAnswer) -> dict[str, Any]:
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
) -> Generator[dict[str, Any] | None, None, Fused]:
    """The panel in parallel (each member's events as it finishes; None: time for a keep-alive), then the
    analysis when any member answered; what each call spends is added to `meter` as it ends. `scan`: the caller's
    guardrails' scan of what a member's tools hand it; raises Refused (once every member stopped) when it refused."""
    started = time.monotonic()
    sent = member_request(request, panel)
    answers: dict[int, PanelAnswer] = {}
    scan = meter.metered(scan)
    with ThreadPoolExecutor(max_workers=len(panel.models), thread_name_prefix="fusion-panel") as pool:
        futures: dict[Future[PanelAnswer], int] = {
            pool.submit(_call, model, sent, plans[model], panel, meter, None, scan): index
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
    review_request = analysis_request(request, fused.served)
    review_input = analysis_input(request, len(panel.models))  # what worst_cost held for it
    yield {
        "type": "response.fusion_call.analysis.in_progress",
        "analyst_model": panel.analyst,
        "judge_model": panel.analyst,
    }
    review = yield from _waiting(
        lambda: _call(panel.analyst, review_request, plans[panel.analyst], None, meter, review_input)
    )
    fused.review = review
    fused.analysis = analysis_parse(review.text) if review.status == "completed" else None
    fused.analysis_status = "completed" if fused.analysis is not None else review.status if review.error else "unparsed"
    if fused.analysis is not None:
        yield {"type": "response.fusion_call.analysis.completed", "analysis": fused.analysis}
    return fused


def panel_scan(ctx: RequestContext, panel: Panel) -> ToolResultScan | None:
    """The caller's guardrails' scan of what the members' tools hand them: the request's own loop's when the run
    is its gateway:fusion tool, else the one the pipeline offers for this context (its budgets); None without tools
    or content filters."""
    if not panel.tools:
        return None
    if ctx.tool_loop is not None and ctx.tool_loop.scan is not None:
        return ctx.tool_loop.scan
    return ctx.result_scan(ctx) if ctx.result_scan is not None else None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
