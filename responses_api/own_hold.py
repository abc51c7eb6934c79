"""What a request's own hold will need, asked before it is taken (RequestContext.own_hold): a stage that runs paid
calls before that hold (a fusion panel, whose final answer is the request's own call) holds it up front with the
same estimate, so the request's hold, taking the stage's over, is never refused after those calls ran."""

from dataclasses import replace
from decimal import Decimal

from responses_api.normalize import Prepared, estimate_tokens
from responses_api.service import _reservation_amount, _tools_hold, response_plan
from routing.canonical import CanonicalRequest
from routing.stages import RequestContext


def response_own_hold(
    request: CanonicalRequest, models: tuple[str, ...], extra_tokens: int, *, ctx: RequestContext, prepared: Prepared
) -> Decimal:
    """The request's own hold (response_hold's amount, at list price: at least a BYOK fee, and what a budget
    counting BYOK holds) were it `request` routed to `models`, its input estimated `extra_tokens` more than its
    text (what a stage will add to it). Routed on its text alone, so an input that may grow is not refused for a
    context it may still fit; priced with the tokens added, over those candidates (the hold's, after they are
    added, are among them: the context only removes some), so the hold later is at most this. Raises the plan's
    GatewayError (no endpoint can take it)."""
    estimate = estimate_tokens(request.input, request.instructions, request.tools)
    routed = replace(prepared, canonical=request, models=list(models), estimated_input_tokens=estimate)
    plan = response_plan(ctx=ctx, prepared=routed)
    grown = replace(routed, estimated_input_tokens=estimate + extra_tokens)
    amount = _reservation_amount(plan=plan, prepared=grown, caller=ctx.caller, list_price=True)
    return amount + _tools_hold(grown)
