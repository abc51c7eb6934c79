"""POST /responses: plan the attempts, hold credits, call upstream with fallback, settle, record."""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal

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
from responses_api.render import ResultShell, output_items, usage_block
from routing import upstream
from routing.canonical import CanonicalResponse, Usage
from routing.errors import UpstreamError
from routing.health import health_record, sticky_get, sticky_key, sticky_set
from routing.preferences import account_defaults, preferences_build
from routing.pricing import max_cost, usage_cost, usage_cost_split
from routing.selection import Candidate, RoutePlan, RoutingCaller, endpoints_for_request
from routing.snapshot import current_snapshot

logger = logging.getLogger(__name__)
DEFAULT_RESERVED_OUTPUT_TOKENS = 4096
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

    def price(self, usage: Usage) -> tuple[Decimal, Decimal]:
        """(what to charge, list-price cost): the list price on shared capacity, the BYOK fee on a key."""
        list_cost = usage_cost(endpoint=self.served.endpoint, usage=usage)
        if not self.served.is_byok:
            return list_cost, list_cost
        fee = byok_fee(list_cost=list_cost, plan=self.ctx.caller.plan,
                       month_to_date=byok_month_to_date(account_id=self.ctx.caller.account_id))
        return fee, list_cost

    def charge(self, cost: Decimal) -> Decimal:
        return credits.credits_settle(reservation=self.reservation, cost=cost, generation_id=self.generation_id,
                                      is_byok=self.served.is_byok).charged

    def settle(self, usage: Usage) -> tuple[Decimal, Decimal]:
        cost, list_cost = self.price(usage)
        return self.charge(cost), list_cost

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
    snapshot = current_snapshot()
    prefs = preferences_build(provider=data.get("provider"), route=data.get("route"),
                              service_tier=data.get("service_tier"), suffix=prepared.suffix,
                              account=account_defaults(account_id=ctx.caller.account_id, snapshot=snapshot))
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
        snapshot=snapshot,
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
        response_abandon(run)
        raise


def response_abandon(run: ResponseRun) -> None:
    """An unexpected failure: give the hold back (unless it was settled) and record the failure."""
    logger.exception("request %s failed unexpectedly", run.generation_id)
    try:
        credits.credits_release(reservation=run.reservation)
        if not Generation.objects.filter(pk=run.generation_id).exists():
            run.write_generation(status="failed", error_type="server")
    except Exception:
        logger.exception("could not release the reservation of %s", run.generation_id)


def _create_json(run: ResponseRun) -> dict:
    release_db_connection()  # an upstream call may take minutes: do not hold a pooled connection meanwhile
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
        cost, list_cost = run.price(response.usage)
        with transaction.atomic():  # the charge and its generation record commit together
            # The record first: the settlement's balance update is the last statement, so the account row
            # (written by every request of the account) stays locked as briefly as possible.
            run.write_generation(status=response.status, usage=response.usage, cost=cost, upstream_cost=list_cost,
                                 finish_reason=response.incomplete_reason or "stop", upstream_id=response.upstream_id)
            charged = run.charge(cost)
            if charged != cost:  # the balance could not cover it all (see credits_settle)
                Generation.objects.filter(pk=run.generation_id).update(cost=charged)
        return run.result(response, items=output_items(response), charged=charged, list_cost=list_cost)
    raise run.fail(last_error)


def release_db_connection() -> None:
    """Return this thread's database connection (to the pool on PostgreSQL); Django reopens it on demand."""
    if not connection.in_atomic_block:
        connection.close()
