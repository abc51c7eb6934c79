"""The model calls the gateway makes for a request besides its own (a fusion panel and its analysis, the
auto-router's classifier, the moderation engine, the guardrails' entity model): each held before it runs
(`call_hold`: the credits, the key's limit and every guardrail budget, as the request's own hold; the request's
hold takes it over, or a refused request's charge), its reported usage billed at most at the call's own worst case,
what was sent and its output limit, which is what the hold counts (`call_worst`; a fusion panel's:
fusion.worst_cost), so that a provider reporting a billion tokens can neither have the caller's whole balance nor
cost more than was held for the call. Here (routing) so that plugins and guardrails both use it."""

import json
import logging
import threading
from collections.abc import Callable
from decimal import Decimal

from gateway.billing.fees import byok_fee, byok_month_to_date
from gateway.billing.generations import GenerationRecord
from gateway.billing.services import (
    ReservationHandle,
    SpendCapExceeded,
    credits_reserve,
    generation_settle,
    hold_drop,
)
from gateway.errors import GatewayError, PaymentRequired
from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    FunctionCall,
    FunctionCallOutput,
    ImagePart,
    Message,
    TextPart,
    Usage,
)
from routing.catalog import EndpointInfo
from routing.errors import ErrorType
from routing.pricing import max_cost
from routing.providers.anthropic.request import EFFORT_BUDGET
from routing.selection import Candidate, RoutePlan
from routing.stages import RequestContext

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_TOKENS = 4096  # a call's output bound when it sets no max_output_tokens
CHARS_PER_TOKEN = 4  # the gateway's input estimate (as responses_api.normalize's)
IMAGE_TOKENS = 1000  # an image's share of it (as responses_api.normalize's)
# What a provider counts beyond the text (its chat template: role markers, tool formatting), which a short call's
# estimate would otherwise leave out: an honest provider's count of a one-word call is billed, not clamped.
CALL_OVERHEAD_TOKENS = 64
UNKNOWN_CONTEXT_TOKENS = 2_000_000  # the input bound on an endpoint of unknown context
COUNTS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


def sent_tokens(request: CanonicalRequest) -> int:
    """The input tokens a call sends, as the gateway estimates every input (4 characters a token, 1,000 an
    image): its instructions, its messages, function calls and results, and its tools' declarations, plus the
    provider's own formatting (CALL_OVERHEAD_TOKENS)."""
    chars = len(request.instructions or "")
    if request.tools:
        chars += len(json.dumps([(t.name, t.description, t.parameters) for t in request.tools]))
    for item in request.input:
        if isinstance(item, Message):
            for part in item.content:
                if isinstance(part, TextPart):
                    chars += len(part.text)
                elif isinstance(part, ImagePart):
                    chars += IMAGE_TOKENS * CHARS_PER_TOKEN
                else:  # a document's base64: a rough share (as the request's own estimate)
                    chars += len(getattr(part, "file_data", "") or "") // 3
        elif isinstance(item, FunctionCall):
            chars += len(item.arguments) + len(item.name)
        elif isinstance(item, FunctionCallOutput):
            chars += len(item.output)
    return chars // CHARS_PER_TOKEN + CALL_OVERHEAD_TOKENS


def output_bound(request: CanonicalRequest, endpoint: EndpointInfo) -> int:
    """The most output tokens a call may bill on this endpoint: its limit (the endpoint's maximum when lower),
    plus a thinking budget when it asks for reasoning (the adapters that think raise the upstream limit by it)."""
    output = min(request.max_output_tokens or DEFAULT_OUTPUT_TOKENS, endpoint.max_completion_tokens or 1 << 62)
    if request.reasoning is not None and request.reasoning.enabled is not False:
        output += max(request.reasoning.max_tokens or 0, max(EFFORT_BUDGET.values()))
    return output


def input_bound(input_tokens: int, endpoint: EndpointInfo) -> int:
    """A call's input worst case on this endpoint: what was sent, at most the endpoint's context."""
    return min(input_tokens, endpoint.context_length or UNKNOWN_CONTEXT_TOKENS)


def bounded_usage(
    usage: Usage, request: CanonicalRequest, endpoint: EndpointInfo, *, input_tokens: int | None = None
) -> Usage:
    """A plugin call's reported usage as billed: counts that are no non-negative integers are 0, the output at
    most the call's output bound, the input at most what was sent (`input_tokens`: what the call's hold counted
    for it, else sent_tokens), parts at most their whole; no provider-run searches (none were sent). The hold of
    the call counts exactly these bounds, so no call costs more than was held for it."""
    counts = {name: value if type(value := getattr(usage, name, 0)) is int and value >= 0 else 0 for name in COUNTS}
    sent = sent_tokens(request) if input_tokens is None else input_tokens
    counts["output_tokens"] = min(counts["output_tokens"], output_bound(request, endpoint))
    counts["input_tokens"] = min(counts["input_tokens"], input_bound(sent, endpoint))
    counts["cached_tokens"] = min(counts["cached_tokens"], counts["input_tokens"])
    counts["cache_write_tokens"] = min(counts["cache_write_tokens"], counts["input_tokens"] - counts["cached_tokens"])
    counts["reasoning_tokens"] = min(counts["reasoning_tokens"], counts["output_tokens"])
    return Usage(**counts)


def bound_for(
    request: CanonicalRequest, *, input_tokens: int | None = None
) -> Callable[[CanonicalResponse, Candidate], Usage]:
    """The attempt engine's `bound_usage` for a call of `request` (`input_tokens`: as bounded_usage's)."""
    return lambda response, candidate: bounded_usage(
        response.usage, request, candidate.endpoint, input_tokens=input_tokens
    )


def call_worst(plan: RoutePlan, request: CanonicalRequest) -> Decimal:
    """The most a call of `request` can cost: its dearest candidate, billed what bounded_usage allows."""
    sent = sent_tokens(request)
    return max(
        (
            max_cost(
                endpoint=c.endpoint,
                input_tokens=input_bound(sent, c.endpoint),
                max_output_tokens=output_bound(request, c.endpoint),
            )
            for c in plan.candidates
        ),
        default=Decimal(0),
    )


class CallerPricing:
    """What the caller is charged for a side call made on its behalf with its own plan (a fusion member, the
    analyst), as for its request's own call (responses_api.service): the list price on shared capacity, the BYOK
    fee when the caller's key served (after the month's free allowance, the run's earlier BYOK calls counted in the
    month). Thread-safe: a fusion panel's members charge from their threads."""

    def __init__(self, ctx: RequestContext):
        self.account_id = ctx.caller.account_id
        self.plan = ctx.caller.plan
        self._month: Decimal | None = None  # read once, when a BYOK call is first priced
        self._lock = threading.Lock()

    def charge(self, candidate: Candidate, list_cost: Decimal) -> Decimal:
        return self.byok(list_cost) if candidate.is_byok else list_cost

    def byok(self, list_cost: Decimal) -> Decimal:
        """The fee for a BYOK call of `list_cost`, the call then counted in the month (the next one's fee)."""
        with self._lock:
            if self._month is None:
                self._month = byok_month_to_date(account_id=self.account_id)
            fee = byok_fee(list_cost=list_cost, month_to_date=self._month, plan=self.plan)
            self._month += list_cost
            return fee


def call_hold(
    ctx: RequestContext, worst: Decimal, *, label: str, cap_worst: Decimal | None = None
) -> ReservationHandle | GatewayError:
    """A model call's worst case held before it runs, a hold of its own (`label` its requested model), against the
    credits, the key's limit and every budget the caller's guardrails set (ctx.caps), as the request's own hold
    is: concurrent requests cannot spend the same credits or budget twice, and a call the budget cannot cover never
    runs. The refusal (402, or 403 naming the budget) when they cannot cover it. A pre-stage hands the hold on
    (Staged.holds / Block.holds): the request's own hold, or a refused request's charge, takes it over.
    `cap_worst`: the list-price worst case when the call may run on the caller's BYOK key (`worst` then counts its
    fee), what budgets counting BYOK hold it to, as the request's own hold."""
    counted = cap_worst if cap_worst is not None and any(cap.include_byok for cap in ctx.caps) else None
    try:
        return credits_reserve(
            account_id=ctx.caller.account_id,
            amount=worst,
            api_key_id=ctx.caller.key_id,
            key_has_limit=ctx.caller.has_limit,
            caps=ctx.caps,
            cap_amount=counted,
            requested_model=label,
            workspace_id=ctx.caller.workspace_id,
        )
    except (PaymentRequired, SpendCapExceeded) as refused:
        return refused


def call_charge(ctx: RequestContext, hold: ReservationHandle, *, cost: Decimal, usage: Usage) -> None:
    """Close a side call's hold that nothing takes over (the stage that took it failed unexpectedly midway): what
    its calls that ran spent (`cost`, at most the hold: each is billed at most its own worst case) is charged out
    of it, recorded as a failed generation of its own under the hold's label; the rest is given back. Nothing
    spent: the hold is dropped. Never raises (it runs while another error is on its way up): a database that does
    not answer settles it later (settle_retry)."""
    record = GenerationRecord(
        id=hold.id,
        account_id=hold.account_id,
        api_key_id=hold.api_key_id,
        workspace_id=ctx.caller.workspace_id,
        requested_model="",
        status="failed",
        error_type=ErrorType.SERVER,
        tokens_input=usage.input_tokens,
        tokens_cached=usage.cached_tokens,
        tokens_cache_write=usage.cache_write_tokens,
        tokens_output=usage.output_tokens,
        tokens_reasoning=usage.reasoning_tokens,
        cost=cost,
        session_id=ctx.session_id,
    )
    try:
        if cost > 0:
            generation_settle(reservation=hold, record=record, charge=True)
        else:
            hold_drop(hold)
    except Exception:
        logger.exception("the side calls' hold %s could not be closed (%s USD spent)", hold.id, cost)
