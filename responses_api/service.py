"""POST /responses: plan the attempts, hold credits, call upstream with fallback, settle, record."""

import logging
import math
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
from responses_api.metadata import attach_error_metadata, gateway_metadata, requested_models
from responses_api.normalize import Prepared, prepare, truncate_to_fit
from responses_api.render import ResultShell, output_items, usage_block
from routing import upstream
from routing.canonical import CanonicalResponse, FilePart, Message, Usage
from routing.errors import UpstreamError
from routing.health import health_record, sticky_get, sticky_key, sticky_set
from routing.preferences import account_defaults, preferences_build
from routing.pricing import max_cost, usage_cost, usage_cost_split
from routing.providers.anthropic.request import EFFORT_BUDGET, MIN_THINKING_BUDGET
from routing.selection import Candidate, RoutePlan, RoutingCaller, endpoints_for_request
from routing.snapshot import current_snapshot

logger = logging.getLogger(__name__)
DEFAULT_RESERVED_OUTPUT_TOKENS = 4096
# Reported usage is billed as reported while plausible: output tokens at most the request's maximum (plus a
# thinking budget some adapters add, plus this margin), input tokens at most the input estimate times this
# factor plus this slack (a tokenizer can count 2 tokens per character; images, documents and the provider's
# own tool prompts are estimated roughly). Beyond that the usage is clamped to what the hold assumed.
USAGE_OUTPUT_MARGIN = 64
USAGE_INPUT_FACTOR = 8
USAGE_INPUT_SLACK = 4096
UNKNOWN_CONTEXT_TOKENS = 2_000_000  # the input bound for documents by URL on an endpoint of unknown context
USAGE_FIELDS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
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
    usage_anomaly: dict | None = None

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

    def bound_usage(self, usage: Usage, candidate: Candidate) -> Usage:
        """The provider's usage when plausible for this request; otherwise clamped (negatives to 0, counts above
        the request's limits to what the hold assumed), the anomaly kept for the generation record and logged."""
        bounds = usage_bounds(prepared=self.prepared, endpoint=candidate.endpoint)
        bounded, reasons = clamp_usage(usage, bounds)
        if reasons:
            self.usage_anomaly = {
                "reasons": reasons, "provider": candidate.endpoint.provider_slug,
                "reported": {name: _reported(getattr(usage, name, None)) for name in USAGE_FIELDS},
                "plausible_max": {"input_tokens": bounds.input_tokens, "output_tokens": bounds.output_tokens},
                "billed": {name: getattr(bounded, name) for name in USAGE_FIELDS},
            }
            logger.warning("generation %s: implausible usage from %s (%s); billed as %s", self.generation_id,
                           candidate.endpoint.provider_slug, "; ".join(reasons), self.usage_anomaly["billed"])
        return bounded

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

    def price_bounded(self, usage: Usage) -> tuple[Decimal, Decimal]:
        """`price`, never above the hold when the provider's usage was implausible (and clamped)."""
        cost, list_cost = self.price(usage)
        if self.usage_anomaly is not None:
            cost = min(cost, self.reservation.amount)
        return cost, list_cost

    def charge(self, cost: Decimal) -> Decimal:
        return credits.credits_settle(reservation=self.reservation, cost=cost, generation_id=self.generation_id,
                                      is_byok=self.served.is_byok).charged

    def settle(self, usage: Usage) -> tuple[Decimal, Decimal]:
        cost, list_cost = self.price_bounded(usage)
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
            provider_responses=tuple(self.attempts), usage_anomaly=self.usage_anomaly,
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
    """Validate against the catalog, plan the attempts and hold credits. Raises GatewayError (400/402/404/503),
    with gateway_metadata when the caller asked for it."""
    planned: list[RoutePlan] = []
    try:
        return _prepare(ctx=ctx, data=data, planned=planned)
    except GatewayError as error:
        if ctx.want_metadata and error.gateway_metadata is None:
            if planned:
                error.gateway_metadata = gateway_metadata(plan=planned[0], attempts=[], served=None)
            else:
                requested, models = requested_models(data)
                attach_error_metadata(error, requested=requested, models=models)
        raise


def _prepare(*, ctx: RequestContext, data: dict, planned: list) -> ResponseRun:
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
    planned.append(plan)
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
        response = replace(response, usage=run.bound_usage(response.usage, candidate))
        run.record_attempt(candidate, started, None, usage=response.usage)
        run.served = candidate
        run.remember_session()
        cost, list_cost = run.price_bounded(response.usage)
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


@dataclass(frozen=True)
class UsageBounds:
    input_tokens: int  # the most input tokens that are plausible for the request
    output_tokens: int  # the most output tokens that are plausible
    held_input_tokens: int  # what the credit hold assumed
    held_output_tokens: int


def usage_bounds(*, prepared: Prepared, endpoint) -> UsageBounds:
    requested_max = prepared.data.get("max_output_tokens") or endpoint.max_completion_tokens
    held_output = requested_max or DEFAULT_RESERVED_OUTPUT_TOKENS  # as _reservation_amount
    output = requested_max or endpoint.context_length or DEFAULT_RESERVED_OUTPUT_TOKENS
    reasoning = prepared.canonical.reasoning
    if reasoning is not None and reasoning.enabled is not False and reasoning.effort != "none":
        # Anthropic and Bedrock requests raise the upstream maximum by the thinking budget.
        output += max(MIN_THINKING_BUDGET, reasoning.max_tokens or 0,
                      EFFORT_BUDGET.get(reasoning.effort or "medium", max(EFFORT_BUDGET.values())))
    estimated = prepared.estimated_input_tokens
    plausible_input = estimated * USAGE_INPUT_FACTOR + USAGE_INPUT_SLACK
    if _has_referenced_documents(prepared):  # a document by URL or file id can be any size up to the context
        plausible_input = max(plausible_input, endpoint.context_length or UNKNOWN_CONTEXT_TOKENS)
    elif endpoint.context_length:
        plausible_input = min(plausible_input, max(endpoint.context_length, estimated) + USAGE_INPUT_SLACK)
    return UsageBounds(input_tokens=plausible_input, output_tokens=output + USAGE_OUTPUT_MARGIN,
                       held_input_tokens=estimated, held_output_tokens=held_output)


def _has_referenced_documents(prepared: Prepared) -> bool:
    return any(isinstance(part, FilePart) and not part.file_data
               for item in prepared.canonical.input if isinstance(item, Message) for part in item.content)


def clamp_usage(usage: Usage, bounds: UsageBounds) -> tuple[Usage, list[str]]:
    """(the usage to bill and show, why it differs from the reported one: empty when it does not)."""
    reasons = []
    counts = {}
    for name in USAGE_FIELDS:
        value = getattr(usage, name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            reasons.append(f"{name} is not a number")
            value = 0
        elif value < 0:
            reasons.append(f"negative {name}")
            value = 0
        counts[name] = int(value)
    if counts["input_tokens"] > bounds.input_tokens:
        reasons.append(f"input_tokens above the plausible {bounds.input_tokens}")
        counts["input_tokens"] = bounds.held_input_tokens
    if counts["output_tokens"] > bounds.output_tokens:
        reasons.append(f"output_tokens above the plausible {bounds.output_tokens}")
        counts["output_tokens"] = bounds.held_output_tokens
    for part, whole, limit in (("cached_tokens", "input_tokens", counts["input_tokens"]),
                               ("cache_write_tokens", "input_tokens", counts["input_tokens"] - counts["cached_tokens"]),
                               ("reasoning_tokens", "output_tokens", counts["output_tokens"])):
        if counts[part] > limit:
            if not any(part in reason for reason in reasons):
                reasons.append(f"{part} above {whole}")
            counts[part] = max(0, limit)
    if not reasons:
        return usage, []
    return Usage(**counts), reasons


def _reported(value):
    """A reported count as it can be stored (JSON): the integer, or a short text for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return repr(value)[:40]


def release_db_connection() -> None:
    """Return this thread's database connection (to the pool on PostgreSQL); Django reopens it on demand."""
    if not connection.in_atomic_block:
        connection.close()
