"""One /responses request's state from its hold to its settlement (`ResponseRun`): its attempt sequence (and the
server-tool loop's later rounds), the usage checks on what the providers report (routing.pricing_usage), the
price, and the one settlement with its generation record (gateway.billing.records)."""

import logging
import time
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from decimal import Decimal

from django.conf import settings

from gateway.billing import services as credits
from gateway.billing.fees import byok_fee, byok_month_to_date
from gateway.billing.generations import GenerationRecord
from gateway.billing.records import generation_record
from gateway.errors import GatewayError
from responses_api import stages
from responses_api.errors import final_error
from responses_api.metadata import gateway_metadata
from responses_api.normalize import Prepared, reestimated
from responses_api.render import ResultShell, usage_block
from routing.accumulate import FoldStep
from routing.attempts import AttemptRecord, AttemptSequence, AttemptsFailed, Served, _Waiting
from routing.canonical import CanonicalRequest, CanonicalResponse, Usage
from routing.errors import ErrorType, UpstreamError
from routing.health import sticky_key
from routing.pricing import usage_cost, usage_cost_split
from routing.pricing_usage import checked_usage, usage_add, usage_anomaly, usage_bounds
from routing.selection import Candidate, RoutePlan
from routing.stages import RequestContext, StageEntry, ToolLoop

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settled:
    charged: Decimal  # what the balance paid
    list_cost: Decimal  # the list price of the usage (the BYOK fee's basis)


@dataclass
class ResponseRun:
    """One /responses request: what was asked (prepared), the plan, the hold, and its attempt sequence
    (routing.attempts). Pricing and the one settlement (`close`) are here; rendering is in render/stream_render."""

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
        prepared = prepared or self.prepared
        bounds = usage_bounds(
            request=prepared.canonical,
            estimated_input_tokens=prepared.estimated_input_tokens,
            endpoint=candidate.endpoint,
        )
        bounded, reasons = checked_usage(response, bounds)
        if reasons:
            self.usage_anomaly = usage_anomaly(
                response=response,
                billed=bounded,
                bounds=bounds,
                reasons=reasons,
                provider=candidate.endpoint.provider_slug,
            )
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
            record = self._record(
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
            )
            charged = credits.generation_settle(
                reservation=self.reservation,
                replacing=tuple(self.tool_holds),
                charge=served is not None or stage_cost > 0,
                record=record,
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
        return generation_record(
            generation_id=self.generation_id,
            caller=self.ctx.caller,
            session_id=self.ctx.session_id,
            requested_model=self.plan.requested,
            status=status,
            endpoint=served.endpoint if served else None,
            is_byok=bool(served and served.is_byok),
            usage=usage,
            cost=cost,
            upstream_cost=upstream_cost,
            finish_reason=finish_reason,
            error_type=error_type,
            upstream_id=upstream_id,
            streamed=self.stream,
            cancelled=cancelled,
            started=self.started,
            ttft_ms=ttft_ms,
            service_tier=self.prepared.canonical.service_tier or "",
            attempts=self.attempts,
            usage_anomaly=self.usage_anomaly,
            guardrail_flags=[
                {"guardrail_id": e.extra["guardrail_id"], "name": e.name, "patterns": e.data["patterns"]}
                for e in self.pipeline
                if e.type == "guardrail" and e.outcome == "flagged"
            ]
            or None,
            stage_record=self.record,
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


def response_abandon(run: ResponseRun) -> None:
    """An unexpected failure: give the hold back (unless it was settled) and record the failure."""
    logger.exception("request %s failed unexpectedly", run.generation_id)
    try:
        if run.settled is not None:
            return  # settled and recorded: the failure came later (a settlement is once: see generation_settle)
        run.close(status="failed", error_type=ErrorType.SERVER)
    except Exception:
        logger.exception("could not release the reservation of %s", run.generation_id)
