"""POST /responses: plan the attempts, hold credits, call upstream with fallback, settle, record."""

import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction

from gateway.accounts.authentication import Caller
from gateway.billing import services as credits
from gateway.billing.fees import byok_fee, byok_month_to_date
from gateway.billing.generations import (
    GenerationRecord,
    ProviderAttempt,
    generation_create,
    generation_id_new,
)
from gateway.billing.models import Generation
from gateway.errors import GatewayError
from responses_api.errors import final_error
from responses_api.metadata import gateway_metadata
from responses_api.normalize import Prepared, prepare, truncate_to_fit
from responses_api.render import ResultShell, failure_error, output_items, usage_block
from responses_api.stream_render import DONE, KEEPALIVE, StreamRenderer
from routing import upstream
from routing.accumulate import Accumulator
from routing.canonical import CanonicalResponse, Finished, ResponseStarted, Usage, UsageReported
from routing.errors import UpstreamError
from routing.health import health_record, sticky_get, sticky_key, sticky_set
from routing.preferences import account_defaults, preferences_build
from routing.pricing import max_cost, usage_cost, usage_cost_split
from routing.selection import Candidate, RoutePlan, RoutingCaller, endpoints_for_request

logger = logging.getLogger(__name__)
DEFAULT_RESERVED_OUTPUT_TOKENS = 4096
NOT_CONTENT = (ResponseStarted, UsageReported, Finished)
MSG_PROMPT_NOT_FOUND = "Prompt {id} not found: this gateway stores no prompt templates"


@dataclass(frozen=True)
class RequestContext:
    caller: Caller
    session_id: str = ""
    want_metadata: bool = False


@dataclass
class ResponseRun:
    """One /responses request across its attempts."""

    ctx: RequestContext
    prepared: Prepared
    plan: RoutePlan
    reservation: credits.ReservationHandle
    generation_id: str = field(default_factory=generation_id_new)
    started: float = field(default_factory=time.monotonic)
    attempts: list[ProviderAttempt] = field(default_factory=list)
    served: Candidate | None = None
    next_candidate: int = 0

    def __post_init__(self):
        self.shell = ResultShell(id="resp_" + self.generation_id.removeprefix("gen-"), created_at=int(time.time()),
                                 requested_model=self.plan.requested, data=self.prepared.data)

    @property
    def stream(self) -> bool:
        return self.prepared.canonical.stream

    def metadata(self) -> dict | None:
        if not self.ctx.want_metadata:
            return None
        return gateway_metadata(plan=self.plan, attempts=self.attempts, served=self.served)

    def candidates_left(self) -> Iterator[Candidate]:
        while self.next_candidate < len(self.plan.candidates):
            candidate = self.plan.candidates[self.next_candidate]
            self.next_candidate += 1
            yield candidate

    def upstream_request(self, candidate: Candidate):
        # A service tier reaches only endpoints that offer it (`fast` was already made `priority`).
        tier = self.plan.service_tier if self.plan.service_tier in candidate.endpoint.service_tiers else None
        canonical = replace(self.prepared.canonical, model=candidate.endpoint.upstream_model, service_tier=tier)
        return upstream.build_upstream_request(endpoint=candidate.endpoint, request=canonical,
                                               credentials=candidate.credentials)

    def record_attempt(self, candidate: Candidate, started: float, error: UpstreamError | None,
                       usage: Usage | None = None, ttft_s: float | None = None) -> None:
        elapsed = time.monotonic() - started
        if error is None or error.retryable:  # bad input says nothing about the endpoint's health
            generating = elapsed - (ttft_s or 0)
            throughput = usage.output_tokens / generating if usage and usage.output_tokens and generating > 0 \
                else None
            health_record(endpoint_id=candidate.endpoint.id, ok=error is None, latency_s=elapsed, ttft_s=ttft_s,
                          throughput=throughput)
        self.attempts.append(ProviderAttempt(
            provider_name=candidate.endpoint.provider_slug, status=200 if error is None else error.status,
            latency_ms=int((time.monotonic() - started) * 1000), is_byok=candidate.is_byok,
            endpoint_id=candidate.endpoint.id, model_permaslug=candidate.endpoint.model_id,
            error_type=error.error_type if error else None,
        ))

    def fail(self, error: UpstreamError) -> GatewayError:
        credits.credits_release(reservation=self.reservation)
        self.write_generation(status="failed", error_type=error.error_type)
        failure = final_error(error, attempts=self.attempts, gateway_metadata=self.metadata())
        failure.headers["X-Generation-Id"] = self.generation_id
        return failure

    def remember_session(self) -> None:
        if self.ctx.session_id and self.served:
            sticky_set(key=self.sticky_key, endpoint_id=self.served.endpoint.id)

    @property
    def sticky_key(self) -> str:
        return sticky_key(account_id=self.ctx.caller.account_id, session_id=self.ctx.session_id,
                          model=self.plan.requested)

    def settle(self, usage: Usage) -> tuple[Decimal, Decimal]:
        """Charge the list price on shared capacity, or the BYOK fee on a customer's key."""
        endpoint = self.served.endpoint
        list_cost = usage_cost(endpoint=endpoint, usage=usage)
        cost = list_cost
        if self.served.is_byok:
            cost = byok_fee(list_cost=list_cost, plan=self.ctx.caller.plan,
                            month_to_date=byok_month_to_date(account_id=self.ctx.caller.account_id))
        settlement = credits.credits_settle(reservation=self.reservation, cost=cost,
                                            generation_id=self.generation_id, is_byok=self.served.is_byok)
        return settlement.charged, list_cost

    def write_generation(self, *, status: str, usage: Usage | None = None, cost=Decimal(0), upstream_cost=Decimal(0),
                         finish_reason: str = "", error_type: str = "", upstream_id: str | None = None,
                         ttft_ms: int | None = None, cancelled: bool = False) -> None:
        usage = usage or Usage()
        endpoint = self.served.endpoint if self.served else None
        latency = int((time.monotonic() - self.started) * 1000)
        generation_create(record=GenerationRecord(
            id=self.generation_id, account_id=self.ctx.caller.account_id, api_key_id=self.ctx.caller.key_id,
            workspace_id=self.ctx.caller.workspace_id, requested_model=self.plan.requested,
            model=endpoint.model_id if endpoint else "", provider=endpoint.provider_slug if endpoint else "",
            endpoint_id=endpoint.id if endpoint else None, upstream_id=upstream_id or "", status=status,
            finish_reason=finish_reason, error_type=error_type, tokens_input=usage.input_tokens,
            tokens_cached=usage.cached_tokens, tokens_cache_write=usage.cache_write_tokens,
            tokens_output=usage.output_tokens, tokens_reasoning=usage.reasoning_tokens, cost=cost,
            upstream_cost=upstream_cost, is_byok=bool(self.served and self.served.is_byok), streamed=self.stream,
            cancelled=cancelled, latency_ms=latency, ttft_ms=ttft_ms,
            generation_time_ms=latency - ttft_ms if ttft_ms is not None else None,
            session_id=self.ctx.session_id, service_tier=self.prepared.canonical.service_tier or "",
            provider_responses=tuple(self.attempts),
        ))

    def result(self, response: CanonicalResponse, *, items: list[dict], charged: Decimal, list_cost: Decimal):
        return self.shell.render(
            status=response.status, model=self.served.endpoint.model_id, output=items,
            usage=usage_block(response.usage, cost=float(charged), is_byok=self.served.is_byok,
                              upstream_cost=(float(list_cost), *map(float, usage_cost_split(
                                  endpoint=self.served.endpoint, usage=response.usage)))),
            incomplete_reason=response.incomplete_reason, service_tier=response.service_tier,
            metadata=self.metadata(),
        )


def response_prepare(*, ctx: RequestContext, data: dict) -> ResponseRun:
    """Validate against the catalog, plan the attempts and hold credits. Raises GatewayError (400/402/404/503)."""
    if data.get("prompt"):
        raise GatewayError(MSG_PROMPT_NOT_FOUND.format(id=data["prompt"]["id"]), status=404)
    prepared = prepare(data=data, account_id=str(ctx.caller.account_id))
    if data.get("truncation") == "auto":
        widest = max((e.context_length for e in _catalog_endpoints(prepared.models)), default=0)
        if widest and prepared.estimated_input_tokens > widest:
            prepared = truncate_to_fit(prepared, context_length=widest)
    prefs = preferences_build(provider=data.get("provider"), route=data.get("route"),
                              service_tier=data.get("service_tier"), suffix=prepared.suffix,
                              account=account_defaults(account_id=ctx.caller.account_id))
    sticky = None
    if ctx.session_id:
        sticky = sticky_get(key=sticky_key(account_id=ctx.caller.account_id, session_id=ctx.session_id,
                                           model=prepared.models[0]))
    caller = ctx.caller
    plan = endpoints_for_request(
        models=prepared.models, estimated_input_tokens=prepared.estimated_input_tokens, prefs=prefs,
        used_params=prepared.used_params, sticky_endpoint_id=sticky,
        caller=RoutingCaller(account_id=caller.account_id, workspace_id=caller.workspace_id,
                             api_key_hash=caller.key_hash, user_id=caller.creator_user_id),
    )
    amount = _reservation_amount(plan=plan, prepared=prepared, caller=caller)
    reservation = credits.credits_reserve(account_id=ctx.caller.account_id, amount=amount,
                                          api_key_id=ctx.caller.key_id, key_has_limit=ctx.caller.has_limit)
    return ResponseRun(ctx=ctx, prepared=prepared, plan=plan, reservation=reservation)


def _reservation_amount(*, plan: RoutePlan, prepared: Prepared, caller: Caller) -> Decimal:
    """The worst case over the candidates: list price on shared capacity, the BYOK fee on a key."""
    month_to_date = None
    worst = Decimal(0)
    for candidate in plan.candidates:
        endpoint = candidate.endpoint
        cost = max_cost(endpoint=endpoint, input_tokens=prepared.estimated_input_tokens,
                        max_output_tokens=prepared.data.get("max_output_tokens") or endpoint.max_completion_tokens
                        or DEFAULT_RESERVED_OUTPUT_TOKENS)
        if candidate.is_byok:
            if month_to_date is None:
                month_to_date = byok_month_to_date(account_id=caller.account_id)
            cost = byok_fee(list_cost=cost, month_to_date=month_to_date, plan=caller.plan)
        worst = max(worst, cost)
    return worst


def _catalog_endpoints(models: list[str]):
    from routing.selectors import endpoints_for_model

    return [endpoint for model in models for endpoint in endpoints_for_model(model_id=model)]


# ---- non-streaming -------------------------------------------------------------------------------


def response_create_json(*, run: ResponseRun) -> dict:
    try:
        return _create_json(run)
    except GatewayError:
        raise
    except Exception:
        _abandon(run)
        raise


def _abandon(run: ResponseRun) -> None:
    """An unexpected failure: give the hold back (unless it was settled) and record the failure."""
    logger.exception("request %s failed unexpectedly", run.generation_id)
    try:
        credits.credits_release(reservation=run.reservation)
        if not Generation.objects.filter(pk=run.generation_id).exists():
            run.write_generation(status="failed", error_type="server")
    except Exception:
        logger.exception("could not release the reservation of %s", run.generation_id)


def _create_json(run: ResponseRun) -> dict:
    last_error = None
    for candidate in run.candidates_left():
        started = time.monotonic()
        try:
            response = upstream.call(endpoint=candidate.endpoint, upstream=run.upstream_request(candidate))
        except UpstreamError as error:
            run.record_attempt(candidate, started, error)
            last_error = error
            if not error.retryable:
                break
            continue
        run.record_attempt(candidate, started, None, usage=response.usage)
        run.served = candidate
        run.remember_session()
        with transaction.atomic():  # the charge and its generation record commit together
            charged, list_cost = run.settle(response.usage)
            run.write_generation(status=response.status, usage=response.usage, cost=charged,
                                 upstream_cost=list_cost, finish_reason=response.incomplete_reason or "stop",
                                 upstream_id=response.upstream_id)
        return run.result(response, items=output_items(response), charged=charged, list_cost=list_cost)
    raise run.fail(last_error)


# ---- streaming -----------------------------------------------------------------------------------


@dataclass
class OpenedStream:
    candidate: Candidate
    stream: upstream.UpstreamStream
    upstream_body: dict
    started: float


def _open_next(run: ResponseRun) -> tuple[OpenedStream | None, UpstreamError | None]:
    """Open the next candidate that answers with 200; (None, last error) when none is left or one failed for good."""
    last_error = None
    for candidate in run.candidates_left():
        started = time.monotonic()
        request = run.upstream_request(candidate)
        try:
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
        _abandon(run)
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
        yield KEEPALIVE
        if run.prepared.data.get("debug", {}).get("echo_upstream_body"):
            yield renderer.debug(opened.upstream_body)
        yield renderer.lifecycle("response.created", run.shell.render(status="in_progress"))
        yield renderer.lifecycle("response.in_progress", run.shell.render(status="in_progress"))
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


def release_db_connection() -> None:
    """Return this thread's database connection (to the pool on PostgreSQL); Django reopens it on demand."""
    if not connection.in_atomic_block:
        connection.close()


def _relay(run, opened, renderer, accumulator, outcome, interval) -> Iterator[bytes]:
    outcome["candidate"] = opened.candidate
    events = opened.stream.events()
    ended = False
    for item in _until_first_content(events, interval):
        if item is KEEPALIVE:
            yield KEEPALIVE
        elif item[0] == "event":
            yield from _feed(run, renderer, accumulator, outcome, item[1])
        else:
            ended = item[0] == "end"
    if not ended:
        for event in events:
            yield from _feed(run, renderer, accumulator, outcome, event)
    if not accumulator.has_output() and accumulator.finished is None:
        raise UpstreamError(error_type="provider_unavailable", message="The provider's stream had no output",
                            retryable=True)
    # The upstream finished: close the last item and complete.
    response = accumulator.response()
    first_token = (run.started + outcome["ttft_ms"] / 1000 - opened.started) if outcome["ttft_ms"] else None
    run.record_attempt(opened.candidate, opened.started, None, usage=response.usage, ttft_s=first_token)
    run.served = opened.candidate
    run.remember_session()
    yield from renderer.close_open()
    charged, list_cost = run.settle(response.usage)
    outcome.update(status=response.status, charged=charged, list_cost=list_cost, settled=True)
    result = run.result(response, items=renderer.items, charged=charged, list_cost=list_cost)
    kind = "response.incomplete" if response.status == "incomplete" else "response.completed"
    yield renderer.lifecycle(kind, result)


def _feed(run, renderer, accumulator, outcome, event) -> list[bytes]:
    if outcome["ttft_ms"] is None and not isinstance(event, NOT_CONTENT):
        outcome["ttft_ms"] = int((time.monotonic() - run.started) * 1000)
    accumulator.add(event)
    return renderer.feed(event)


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
            run.write_generation(status=outcome["status"], usage=response.usage, cost=outcome["charged"],
                                 upstream_cost=outcome["list_cost"], upstream_id=response.upstream_id,
                                 finish_reason=response.incomplete_reason or "stop", ttft_ms=outcome["ttft_ms"])
            return
        usage = _usage_so_far(response, estimated_input=run.prepared.estimated_input_tokens)
        charged = list_cost = Decimal(0)
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
    if response.usage.output_tokens:
        return response.usage
    generated = sum(len(getattr(item, "text", "") or getattr(item, "arguments", "") or "") for item in response.output)
    generated += sum(len(text) for item in response.output for text in getattr(item, "summary", ()) +
                     getattr(item, "content", ()))
    if not generated:
        return response.usage
    return replace(response.usage, output_tokens=max(1, generated // 4),
                   input_tokens=response.usage.input_tokens or estimated_input)
