"""The steps of POST /responses that responses_api.pipeline calls: normalize, plan, hold (`response_*`), and
the request's state across them (`ResponseRun`: its attempt sequence, pricing, and the one settlement)."""

import logging
import math
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal

from django.conf import settings

from gateway.accounts.authentication import Caller
from gateway.billing import services as credits
from gateway.billing.fees import byok_fee, byok_month_to_date
from gateway.billing.generations import GenerationRecord
from gateway.errors import GatewayError
from responses_api import stages
from responses_api.errors import final_error
from responses_api.metadata import attach_error_metadata, gateway_metadata, requested_models
from responses_api.normalize import Prepared, prepare, reestimated, truncate_to_fit
from responses_api.render import ResultShell, usage_block
from routing.accumulate import FoldStep
from routing.attempts import AttemptRecord, AttemptSequence, AttemptsFailed, Served, _Waiting
from routing.canonical import CanonicalRequest, CanonicalResponse, FilePart, Message, OutputHostedTool, Usage
from routing.catalog import EndpointInfo
from routing.errors import ErrorType, UpstreamError
from routing.health import sticky_get, sticky_key
from routing.output_bound import output_allowance
from routing.preferences import account_defaults, preferences_build, split_model_suffix
from routing.pricing import max_cost, usage_cost, usage_cost_split
from routing.providers.base import as_mapping
from routing.providers.hosted import searches_bound
from routing.selection import Candidate, RoutePlan, RoutingCaller, endpoints_for_request
from routing.selectors import endpoints_for_model
from routing.snapshot import current_snapshot
from routing.stages import SERVER_TOOL_RESULT_TOKENS, RequestContext, StageEntry, ToolLoop

logger = logging.getLogger(__name__)
# Reported usage is billed as reported while plausible: output tokens at most what the request allows
# (routing.output_bound.output_allowance: its maximum plus a thinking budget some adapters add) plus this margin,
# input tokens at most the input estimate times this factor plus this slack (a tokenizer can count 2 tokens per
# character; images, documents and the provider's own tool prompts are estimated roughly). Beyond that the usage
# is clamped to what the hold assumed.
USAGE_OUTPUT_MARGIN = 64
USAGE_INPUT_FACTOR = 8
USAGE_INPUT_SLACK = 4096
UNKNOWN_CONTEXT_TOKENS = 2_000_000  # the input bound for documents by URL on an endpoint of unknown context
USAGE_FIELDS = (
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "web_search_requests",
)
MSG_FAR_LONGER = "output text far longer than the reported output_tokens"
MSG_PROMPT_NOT_FOUND = "Prompt {id} not found: this gateway stores no prompt templates"


@dataclass(frozen=True, slots=True)
class Settled:
    charged: Decimal  # what the balance paid
    list_cost: Decimal  # the list price of the usage (the BYOK fee's basis)


@dataclass
class ResponseRun:
    """One /responses request: what was asked (prepared), the plan, the hold, and its attempt sequence
    (routing.attempts). Pricing and the one settlement (`close`) are here; rendering is in render/streaming."""

    ctx: RequestContext
    prepared: Prepared
    plan: RoutePlan
    reservation: credits.ReservationHandle  # the hold is the request's generation row (its id is the request's)
    started: float = field(default_factory=time.monotonic)
    usage_anomaly: dict | None = None
    pipeline: list[StageEntry] = field(default_factory=list)  # the stages that ran (gateway_metadata)
    record: dict = field(default_factory=dict)  # the stages' figures for the generation record

    def __post_init__(self) -> None:
        self.record = {**self.prepared.record, **self.record}
        self.shell = ResultShell(
            id="resp_" + self.generation_id.removeprefix("gen-"),
            created_at=int(time.time()),
            requested_model=self.plan.requested,
            data=self.prepared.data,
        )
        self.sequence = self.new_sequence()
        self.settled: Settled | None = None  # set once, by `close`
        # The server-tool loop's later rounds (each its own pass over the plan), billed with the first round.
        self.round_sequences: list[AttemptSequence] = []
        self.rounds: list[Served] = []
        self.tool_cost = Decimal(0)  # the server tools' own costs (web searches, fusion panels)
        self.tool_usage = Usage()  # the tokens of the server tools' own model calls (fusion panels)
        # tools' own holds (a gateway:fusion panel's): given back by the settlement that charges what they covered
        self.tool_holds: list[credits.ReservationHandle] = []
        if self.prepared.server_rounds > 1:
            loop = ToolLoop(
                data=self.prepared.data,
                call=self.tool_round,
                first=lambda: self.sequence.served,
                charge=self.tool_charge,
                stream=self.tool_round_stream if self.stream else None,
                keep=self.tool_holds.append,
                scan=stages.tool_result_scan(self.ctx),  # the guardrails read each round's tool results first
            )
            self.ctx = replace(self.ctx, tool_loop=loop)

    def new_sequence(self, request: CanonicalRequest | None = None) -> AttemptSequence:
        """A fresh pass over the plan's candidates: the request's, or a server-tool loop round's (`request`)."""
        if request is None:
            return AttemptSequence(
                candidates=self.plan.candidates,
                request_for=self.request_for,
                bound_usage=self.bound_usage,
                sticky_key=self.sticky_key if self.ctx.session_id else "",
            )
        prepared = reestimated(self.prepared, request)  # the round's input: what its usage must be plausible for
        return AttemptSequence(
            candidates=self.plan.candidates,
            request_for=lambda candidate: self.request_for(candidate, request),
            bound_usage=lambda response, candidate: self.bound_usage(response, candidate, prepared),
        )

    def tool_round(self, request: CanonicalRequest) -> Served:
        """One more round of the server-tool loop (not streamed); raises UpstreamError when no candidate answers."""
        sequence = self.new_sequence(replace(request, stream=False))
        self.round_sequences.append(sequence)
        try:
            served = sequence.call()
        except AttemptsFailed as failed:
            assert failed.error is not None, "a plan always has a candidate"
            raise failed.error from None
        self.rounds.append(served)
        return served

    def tool_round_stream(self, request: CanonicalRequest) -> Generator[list[FoldStep] | _Waiting, None, Served]:
        """One more round of the server-tool loop, streamed: its fold steps as they arrive (the last ones close its
        item), WAITING while its first content is awaited; raises UpstreamError when no candidate answers or the
        stream fails. A round cut short is billed for what it generated."""
        sequence = self.new_sequence(replace(request, stream=True))
        self.round_sequences.append(sequence)
        try:
            stream = sequence.open_stream(keepalive_interval=settings.STREAM_KEEPALIVE_SECONDS)
        except AttemptsFailed as failed:
            assert failed.error is not None, "a plan always has a candidate"
            raise failed.error from None
        served = None
        try:
            try:
                yield from stream.events()
            except UpstreamError:
                yield stream.fold.close()  # what was sent is closed before the failure goes out
                raise
            yield stream.fold.close()
            assert stream.response is not None
            served = Served(candidate=stream.candidate, response=stream.response)
        finally:
            stream.close()
            if served is None:  # failed, cut or cancelled: what it generated is billed with the request
                cut = stream.fold.response()
                cut = replace(cut, usage=self.bound_usage(cut, stream.candidate, reestimated(self.prepared, request)))
                if cut.usage.output_tokens or cut.usage.web_search_requests:  # the provider's searches too
                    self.rounds.append(Served(candidate=stream.candidate, response=cut))
        self.rounds.append(served)
        return served

    def tool_charge(self, amount: Decimal, usage: Usage) -> None:
        self.tool_cost += amount
        self.tool_usage = usage_add(self.tool_usage, usage)

    def with_rounds(self, usage: Usage) -> Usage:
        """The first round's usage plus the server-tool loop's later rounds', and the tokens of the stages' and
        the server tools' own model calls (a fusion panel and analysis)."""
        return usage_add(
            usage, *(served.response.usage for served in self.rounds), self.prepared.stage_usage, self.tool_usage
        )

    @property
    def generation_id(self) -> str:
        return self.reservation.id

    @property
    def stream(self) -> bool:
        return self.prepared.canonical.stream

    @property
    def attempts(self) -> list[AttemptRecord]:
        if self.round_sequences:
            return self.sequence.attempts + [
                record for sequence in self.round_sequences for record in sequence.attempts
            ]
        return self.sequence.attempts

    @property
    def served(self) -> Candidate | None:
        return self.sequence.served

    def metadata(self) -> dict | None:
        if not self.ctx.want_metadata:
            return None
        # the first round's attempts (a server-tool loop's later rounds are in its pipeline entry and the record)
        metadata = gateway_metadata(plan=self.plan, attempts=self.sequence.attempts, served=self.served)
        metadata["pipeline"] = [entry.as_dict() for entry in self.pipeline]  # [] when no stage ran
        return metadata

    def request_for(self, candidate: Candidate, request: CanonicalRequest | None = None) -> CanonicalRequest:
        # A service tier reaches only endpoints that offer it (`fast` was already made `priority`).
        tier = self.plan.service_tier if self.plan.service_tier in candidate.endpoint.service_tiers else None
        base = self.prepared.canonical if request is None else request
        return replace(base, model=candidate.endpoint.upstream_model, service_tier=tier)

    def bound_usage(self, response: CanonicalResponse, candidate: Candidate, prepared: Prepared | None = None) -> Usage:
        """The provider's usage when plausible for this request; otherwise clamped (negatives to 0, counts above
        the request's limits to what the hold assumed), the anomaly kept for the generation record and logged.
        Output with no output tokens reported is estimated from its text, so it is never free."""
        usage = response.usage
        if (seen := searches_seen(response)) > usage.web_search_requests:  # a stream cut before its usage came
            usage = replace(usage, web_search_requests=seen)
        prepared = prepared or self.prepared
        bounds = usage_bounds(prepared=prepared, endpoint=candidate.endpoint)
        bounded, reasons = clamp_usage(usage, bounds)
        if response.output_cut and bounded.output_tokens < bounds.held_output_tokens:
            # The gateway cut it at its output bound (routing.output_bound): it wrote at least the tokens allowed,
            # which the hold covers (with a reasoning request's thinking budget).
            reasons += [MSG_FAR_LONGER, "output cut at the request's output bound"]
            input_tokens = bounded.input_tokens or prepared.estimated_input_tokens  # (a cut stream's came later)
            bounded = replace(bounded, output_tokens=bounds.held_output_tokens, input_tokens=input_tokens)
        elif bounded.output_tokens <= 0:
            estimated = usage_or_estimate(
                replace(response, usage=bounded), estimated_input=prepared.estimated_input_tokens
            )
            if estimated is not bounded:
                reasons.append("output_tokens not reported: estimated from the text generated")
                bounded, more = clamp_usage(estimated, bounds)
                reasons += more
        elif bounded.output_tokens < bounds.held_output_tokens and _text_tokens(response) > 2 * bounds.output_tokens:
            # Far more text than the request allowed, reported as little: billed as the most the request allowed.
            reasons.append(MSG_FAR_LONGER)
            bounded = replace(bounded, output_tokens=bounds.held_output_tokens)
        if reasons:
            self.usage_anomaly = {
                "reasons": reasons,
                "provider": candidate.endpoint.provider_slug,
                "reported": {name: _reported(getattr(usage, name, None)) for name in USAGE_FIELDS},
                "plausible_max": {"input_tokens": bounds.input_tokens, "output_tokens": bounds.output_tokens},
                "billed": {name: getattr(bounded, name) for name in USAGE_FIELDS},
            }
            logger.warning(
                "generation %s: implausible usage from %s (%s); billed as %s",
                self.generation_id,
                candidate.endpoint.provider_slug,
                "; ".join(reasons),
                self.usage_anomaly["billed"],
            )
        return bounded

    def fail(self, error: UpstreamError | None) -> GatewayError:
        """No candidate served: give the hold back, record the failure, and the error to answer with."""
        assert error is not None, "a plan always has a candidate"
        self.close(status="failed", error_type=error.error_type)
        failure = final_error(error, attempts=self.attempts, gateway_metadata=self.metadata())
        failure.headers["X-Generation-Id"] = self.generation_id
        return failure

    @property
    def sticky_key(self) -> str:
        return sticky_key(
            account_id=self.ctx.caller.account_id, session_id=self.ctx.session_id, model=self.plan.requested
        )

    def price(self, usage: Usage, served: Candidate) -> tuple[Decimal, Decimal]:
        """(what to charge, list-price cost): the list price on shared capacity, the BYOK fee on a key; never
        above the hold when the provider's usage was implausible (and clamped)."""
        cost = list_cost = usage_cost(endpoint=served.endpoint, usage=usage)
        if served.is_byok:
            cost = byok_fee(
                list_cost=list_cost,
                plan=self.ctx.caller.plan,
                month_to_date=byok_month_to_date(account_id=self.ctx.caller.account_id),
            )
        if self.usage_anomaly is not None:
            cost = min(cost, self.reservation.amount - self.prepared.stage_cost)
        return cost, list_cost

    def close(
        self,
        *,
        status: str,
        served: Candidate | None = None,
        usage: Usage | None = None,
        finish_reason: str = "",
        error_type: str = "",
        upstream_id: str | None = None,
        ttft_ms: int | None = None,
        cancelled: bool = False,
    ) -> Settled:
        """Settle and record, once (billing's `generation_settle`: one transaction). With `served`, the usage is
        charged to the hold; without, the hold is given back."""
        assert self.settled is None, "a request is settled once"
        usage = usage or Usage()
        cost = list_cost = Decimal(0)
        if served is not None:
            cost, list_cost = self.price(usage, served)
        for round_served in self.rounds:  # the server-tool loop's later rounds, each at its endpoint's price
            round_cost, round_list_cost = self.price(round_served.response.usage, round_served.candidate)
            cost, list_cost = cost + round_cost, list_cost + round_list_cost
        usage = self.with_rounds(usage)
        # the stages' own model calls and the server tools' costs: charged even when nothing served
        stage_cost = self.prepared.stage_cost + self.tool_cost
        cost += stage_cost
        try:
            charged = credits.generation_settle(
                reservation=self.reservation,
                replacing=tuple(self.tool_holds),
                charge=served is not None or stage_cost > 0,
                record=self._record(
                    status=status,
                    served=served,
                    usage=usage,
                    cost=cost,
                    upstream_cost=list_cost,
                    finish_reason=finish_reason,
                    error_type=error_type,
                    upstream_id=upstream_id,
                    ttft_ms=ttft_ms,
                    cancelled=cancelled,
                ),
            )
        finally:  # the settlement gave the tools' holds back; a failed one did not: given back now (once)
            credits.holds_drop(self.tool_holds)
        self.settled = Settled(charged=charged, list_cost=list_cost)
        return self.settled

    def _record(
        self,
        *,
        status: str,
        served: Candidate | None,
        usage: Usage,
        cost: Decimal,
        upstream_cost: Decimal,
        finish_reason: str,
        error_type: str,
        upstream_id: str | None,
        ttft_ms: int | None,
        cancelled: bool,
    ) -> GenerationRecord:
        endpoint = served.endpoint if served else None
        latency = int((time.monotonic() - self.started) * 1000)
        return GenerationRecord(
            id=self.generation_id,
            account_id=self.ctx.caller.account_id,
            api_key_id=self.ctx.caller.key_id,
            workspace_id=self.ctx.caller.workspace_id,
            requested_model=self.plan.requested,
            model=endpoint.model_id if endpoint else "",
            provider=endpoint.provider_slug if endpoint else "",
            endpoint_id=endpoint.id if endpoint else None,
            upstream_id=upstream_id or "",
            status=status,
            finish_reason=finish_reason,
            error_type=error_type,
            tokens_input=usage.input_tokens,
            tokens_cached=usage.cached_tokens,
            tokens_cache_write=usage.cache_write_tokens,
            tokens_output=usage.output_tokens,
            tokens_reasoning=usage.reasoning_tokens,
            cost=cost,
            upstream_cost=upstream_cost,
            is_byok=bool(served and served.is_byok),
            streamed=self.stream,
            cancelled=cancelled,
            latency_ms=latency,
            ttft_ms=ttft_ms,
            generation_time_ms=latency - ttft_ms if ttft_ms is not None else None,
            session_id=self.ctx.session_id,
            service_tier=self.prepared.canonical.service_tier or "",
            provider_responses=tuple(self.attempts),
            usage_anomaly=self.usage_anomaly,
            guardrail_flags=[
                {"guardrail_id": e.extra["guardrail_id"], "name": e.name, "patterns": e.data["patterns"]}
                for e in self.pipeline
                if e.type == "guardrail" and e.outcome == "flagged"
            ]
            or None,
            moderation_latency=self.record.get("moderation_latency"),
            plugins=self.record.get("plugins") or None,
            router=self.record.get("router"),
        )

    def result(self, response: CanonicalResponse, *, served: Candidate, items: list[dict], settled: Settled) -> dict:
        usage = self.with_rounds(response.usage)  # with the server-tool loop's later rounds
        input_cost, output_cost = usage_cost_split(endpoint=served.endpoint, usage=usage)
        return self.shell.render(
            status=response.status,
            model=served.endpoint.model_id,
            output=items,
            usage=usage_block(
                usage,
                cost=float(settled.charged),
                is_byok=served.is_byok,
                upstream_cost=(float(settled.list_cost), float(input_cost), float(output_cost)),
            ),
            incomplete_reason=response.incomplete_reason,
            service_tier=response.service_tier,
            metadata=self.metadata(),
        )


def searches_seen(response: CanonicalResponse) -> int:
    """The provider's web searches its answer shows (its web_search_call items that searched): billed when the
    usage it reports counts fewer, or came not at all (a stream cut short, a client that left)."""
    return sum(
        1
        for item in response.output
        if isinstance(item, OutputHostedTool)
        and item.item.get("type") == "web_search_call"
        and as_mapping(item.item.get("action")).get("type", "search") == "search"
    )


def usage_add(*usages: Usage) -> Usage:
    """The usages' counts added up."""
    return Usage(**{name: sum(getattr(usage, name) for usage in usages) for name in USAGE_FIELDS})


@contextmanager
def error_metadata(*, ctx: RequestContext, data: dict) -> Iterator[list[RoutePlan]]:
    """A GatewayError raised before the attempts (400/402/404/503) gets gateway_metadata when the caller asked
    for it: the plan's, once there is one (append it to the yielded list), else the requested models'."""
    planned: list[RoutePlan] = []
    try:
        yield planned
    except GatewayError as error:
        if ctx.want_metadata and error.gateway_metadata is None:
            if planned:
                error.gateway_metadata = gateway_metadata(plan=planned[0], attempts=[], served=None)
            else:
                requested, models = requested_models(data)
                attach_error_metadata(error, requested=requested, models=models)
            stages_ran = getattr(error, "pipeline", None)  # a stage's block: the stages that ran, it included
            if stages_ran and error.gateway_metadata is not None:
                error.gateway_metadata["pipeline"] = stages_ran
        raise


def response_normalize(*, ctx: RequestContext, data: dict) -> Prepared:
    """The validated body as the canonical request (models, input estimate; truncated to fit when asked)."""
    if data.get("prompt"):
        raise GatewayError(MSG_PROMPT_NOT_FOUND.format(id=data["prompt"]["id"]), status=404)
    prepared = prepare(data=data, account_id=str(ctx.caller.account_id))
    if data.get("truncation") == "auto":
        widest = max((e.context_length for e in _catalog_endpoints(prepared.models)), default=0)
        if widest and prepared.estimated_input_tokens > widest:
            prepared = truncate_to_fit(prepared, context_length=widest)
    return prepared


def response_plan(*, ctx: RequestContext, prepared: Prepared) -> RoutePlan:
    """The candidates to try, in order (routing.selection); nothing is decrypted here."""
    data = prepared.data
    snapshot = current_snapshot()
    prefs = preferences_build(
        provider=data.get("provider"),
        route=data.get("route"),
        service_tier=data.get("service_tier"),
        suffix=prepared.suffix,
        account=account_defaults(account_id=ctx.caller.account_id, snapshot=snapshot),
    )
    sticky = None
    if ctx.session_id:
        sticky = sticky_get(
            key=sticky_key(account_id=ctx.caller.account_id, session_id=ctx.session_id, model=prepared.models[0])
        )
    caller = ctx.caller
    plan = endpoints_for_request(
        models=prepared.models,
        estimated_input_tokens=prepared.estimated_input_tokens,
        prefs=prefs,
        used_params=prepared.used_params,
        sticky_endpoint_id=sticky,
        caller=RoutingCaller(
            account_id=caller.account_id,
            workspace_id=caller.workspace_id,
            api_key_hash=caller.key_hash,
            user_id=caller.creator_user_id,
        ),
        snapshot=snapshot,
        limits=prepared.limits,
    )
    if prepared.strategy == "direct":
        return plan
    # A router chose the models: the plan keeps the slug the caller asked for (results, record) and how it chose.
    requested = split_model_suffix(data["model"])[0] if data.get("model") else plan.requested
    return replace(plan, strategy=prepared.strategy, requested=requested)


def response_hold(*, ctx: RequestContext, prepared: Prepared, plan: RoutePlan) -> ResponseRun:
    """Hold the worst case over the plan's candidates (402 when the balance or the key's limit cannot)."""
    amount = _reservation_amount(plan=plan, prepared=prepared, caller=ctx.caller) + prepared.stage_cost
    amount += _tools_hold(prepared)
    byok_counted = any(cap.include_byok for cap in prepared.caps) and any(c.is_byok for c in plan.candidates)
    reservation = credits.credits_reserve(
        account_id=ctx.caller.account_id,
        amount=amount,
        api_key_id=ctx.caller.key_id,
        key_has_limit=ctx.caller.has_limit,
        caps=prepared.caps,
        cap_amount=_reservation_amount(plan=plan, prepared=prepared, caller=ctx.caller, list_price=True)
        if byok_counted
        else None,
        requested_model=plan.requested,
        workspace_id=ctx.caller.workspace_id,
        replacing=prepared.holds,  # what the pre-stages' calls spent is in `amount`: their holds are given back
    )
    return ResponseRun(ctx=ctx, prepared=prepared, plan=plan, reservation=reservation)


def response_charge_checks(*, ctx: RequestContext, prepared: Prepared, cost: Decimal) -> None:
    """A request refused after paid calls ran (an entity model, a moderation engine, a fusion panel): their cost is
    charged and recorded as a failed generation (error_type `blocked`), out of the holds the pre-stages took for
    them (Prepared.holds, within the budgets and the balance when taken: the charge takes them over, so it needs no
    more room), given back whatever happens. When the balance cannot cover a cost no hold covered, the refusal
    stands and the gateway absorbs the cost (logged)."""
    held = sum((hold.amount for hold in prepared.holds), Decimal(0))
    reservation = None
    try:
        for amount in dict.fromkeys((cost, min(cost, held))):  # all of it, else what the holds covered
            if amount <= 0:
                break
            try:
                reservation = credits.credits_reserve(
                    account_id=ctx.caller.account_id,
                    amount=amount,
                    api_key_id=ctx.caller.key_id,
                    key_has_limit=False,
                    requested_model=",".join(prepared.models)[:256],
                    workspace_id=ctx.caller.workspace_id,
                    replacing=prepared.holds,
                )
                cost = amount
                break
            except GatewayError:
                logger.warning("the checks of a refused request (%s USD) could not all be charged: balance low", cost)
    finally:  # taken over above, else given back (once), also when the database did not answer
        credits.holds_drop(prepared.holds)
    if reservation is None:
        return
    record = GenerationRecord(
        id=reservation.id,
        account_id=ctx.caller.account_id,
        api_key_id=ctx.caller.key_id,
        workspace_id=ctx.caller.workspace_id,
        requested_model=",".join(prepared.models)[:256],
        status="failed",
        error_type="blocked",
        cost=cost,
        streamed=prepared.canonical.stream,
        session_id=ctx.session_id,
        moderation_latency=prepared.record.get("moderation_latency"),
        plugins=prepared.record.get("plugins") or None,
    )
    credits.generation_settle(reservation=reservation, record=record, charge=True)


def _reservation_amount(*, plan: RoutePlan, prepared: Prepared, caller: Caller, list_price: bool = False) -> Decimal:
    """The worst case over the candidates: list price on shared capacity, the BYOK fee on a key (its list price
    with `list_price`: what a budget counting BYOK spends)."""
    month_to_date = None
    worst = Decimal(0)
    for candidate in plan.candidates:
        endpoint = candidate.endpoint
        output = output_allowance(prepared.canonical, endpoint).held  # a cut answer is billed as much
        cost = max_cost(endpoint=endpoint, input_tokens=prepared.estimated_input_tokens, max_output_tokens=output)
        # The provider's own web searches: the most each call may make (the provider is told), every round.
        cost += searches_bound(prepared.canonical.hosted_tools) * endpoint.price_web_search * prepared.server_rounds
        # The server-tool loop's later rounds: each round's input is the last one's plus its output and a tool
        # result at most (up to the endpoint's context), so the hold covers every round the loop may make.
        for done in range(1, prepared.server_rounds):
            grown = prepared.estimated_input_tokens + done * (output + SERVER_TOOL_RESULT_TOKENS)
            grown = min(grown, endpoint.context_length or grown)
            cost += max_cost(endpoint=endpoint, input_tokens=grown, max_output_tokens=output)
        if candidate.is_byok and not list_price:
            if month_to_date is None:
                month_to_date = byok_month_to_date(account_id=caller.account_id)
            cost = byok_fee(list_cost=cost, month_to_date=month_to_date, plan=caller.plan)
        worst = max(worst, cost)
    return worst


def _tools_hold(prepared: Prepared) -> Decimal:
    """What the post-stages' own calls may cost by themselves (the server tools' web searches: a stage's `hold`)."""
    holds = (
        stage.hold(prepared.data, prepared.server_rounds) for stage in stages.POST_STAGES if hasattr(stage, "hold")
    )
    return sum(holds, Decimal(0))


def _catalog_endpoints(models: list[str]) -> list[EndpointInfo]:
    return [endpoint for model in models for endpoint in endpoints_for_model(model_id=model)]


# ---- non-streaming -------------------------------------------------------------------------------


def response_abandon(run: ResponseRun) -> None:
    """An unexpected failure: give the hold back (unless it was settled) and record the failure."""
    logger.exception("request %s failed unexpectedly", run.generation_id)
    try:
        if run.settled is not None:
            return  # settled and recorded: the failure came later (a settlement is once: see generation_settle)
        run.close(status="failed", error_type=ErrorType.SERVER)
    except Exception:
        logger.exception("could not release the reservation of %s", run.generation_id)


@dataclass(frozen=True)
class UsageBounds:
    input_tokens: int  # the most input tokens that are plausible for the request
    output_tokens: int  # the most output tokens that are plausible
    held_input_tokens: int  # what the credit hold assumed
    held_output_tokens: int
    web_searches: int = 0  # the most provider-run web searches the request may make (and the hold covers)


def usage_bounds(*, prepared: Prepared, endpoint) -> UsageBounds:
    allowed = output_allowance(prepared.canonical, endpoint)  # as the output bound and the hold
    estimated = prepared.estimated_input_tokens
    plausible_input = estimated * USAGE_INPUT_FACTOR + USAGE_INPUT_SLACK
    if _has_referenced_documents(prepared):  # a document by URL or file id can be any size up to the context
        plausible_input = max(plausible_input, endpoint.context_length or UNKNOWN_CONTEXT_TOKENS)
    elif endpoint.context_length:
        plausible_input = min(plausible_input, max(endpoint.context_length, estimated) + USAGE_INPUT_SLACK)
    return UsageBounds(
        input_tokens=plausible_input,
        output_tokens=allowed.tokens + USAGE_OUTPUT_MARGIN,
        held_input_tokens=estimated,
        held_output_tokens=allowed.held,
        web_searches=searches_bound(prepared.canonical.hosted_tools),
    )


def _has_referenced_documents(prepared: Prepared) -> bool:
    return any(
        isinstance(part, FilePart) and not part.file_data
        for item in prepared.canonical.input
        if isinstance(item, Message)
        for part in item.content
    )


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
    if counts["web_search_requests"] > bounds.web_searches:  # more searches than the provider was allowed
        reasons.append(f"web_search_requests above the {bounds.web_searches} the request allowed")
        counts["web_search_requests"] = bounds.web_searches
    for part, whole, limit in (
        ("cached_tokens", "input_tokens", counts["input_tokens"]),
        ("cache_write_tokens", "input_tokens", counts["input_tokens"] - counts["cached_tokens"]),
        ("reasoning_tokens", "output_tokens", counts["output_tokens"]),
    ):
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


def _generated_chars(response: CanonicalResponse) -> int:
    generated = sum(len(getattr(item, "text", "") or getattr(item, "arguments", "") or "") for item in response.output)
    return generated + sum(
        len(text) for item in response.output for text in getattr(item, "summary", ()) + getattr(item, "content", ())
    )


def _text_tokens(response: CanonicalResponse) -> int:
    """A low estimate of the tokens in the generated text (4 characters a token; fewer for most other scripts)."""
    return _generated_chars(response) // 4


def usage_or_estimate(response: CanonicalResponse, *, estimated_input: int) -> Usage:
    """The upstream's usage when it reported one; otherwise an estimate from the text generated so far."""
    if response.usage.output_tokens > 0:
        return response.usage
    generated = _generated_chars(response)
    if not generated:
        return response.usage
    return replace(
        response.usage,
        output_tokens=max(1, generated // 4),
        input_tokens=response.usage.input_tokens or estimated_input,
    )
