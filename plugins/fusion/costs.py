"""What a fusion run can cost at most, held before it runs: the panel, the analysis and (for the model slug) the
final answer, each call's dearest candidate at its input and output bounds."""

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from functools import partial

from gateway.billing.services import ReservationHandle
from gateway.errors import GatewayError
from plugins.common.tool_loop import kind_of
from plugins.common.tools import RUNNERS
from plugins.fusion.analysis import analysis_input, analysis_request, shown_chars, writer_instructions
from plugins.fusion.panel import DEFAULT_OUTPUT_TOKENS, Panel, PanelAnswer, member_request, round_input
from routing.canonical import CanonicalRequest
from routing.pricing import max_cost
from routing.selection import RoutePlan
from routing.side_calls import (
    CHARS_PER_TOKEN,
    CallerPricing,
    call_hold,
    input_bound,
    output_bound,
    sent_tokens,
)
from routing.stages import (
    RequestContext,
)


def worst_cost(
    request: CanonicalRequest,
    plans: list[RoutePlan | GatewayError],
    analyst: RoutePlan | GatewayError,
    *,
    panel: Panel,
    final_answer: bool = True,
    pricing: CallerPricing | None = None,
) -> Decimal:
    """The most the run can cost: each call's (panel, analysis, final answer) dearest candidate for what it sends
    (routing.side_calls: the input as the gateway estimates it; the analyst also reads every panel answer, each at most
    the output a member may bill) and its output bound; a member with tools makes up to `max_tool_calls` more
    rounds, each reading its last output and a tool result more, each call a search at the dearest engine's
    price. Each call is billed at most what is counted for it here (_call), so the run never costs more. With
    `pricing`, a candidate on the caller's BYOK key counts its fee, as it is charged (else its list price)."""
    tool_calls = panel.max_tool_calls if panel.tools else 0
    searching = any(kind_of(tool) == "gateway:web_search" for tool in panel.tools)
    search = RUNNERS.get("gateway:web_search")  # its price: the dearest configured engine's
    search_price = search.price({}) if search is not None and search.price is not None else Decimal(0)
    member = member_request(request, panel)
    first = sent_tokens(member)
    analysis = analysis_input(request, len(plans))
    total = len(plans) * tool_calls * search_price if searching else Decimal(0)
    for plan in plans:
        for done in range(tool_calls + 1):
            total += _dearest(plan, member, partial(round_input, first, done), pricing)
    total += _dearest(analyst, analysis_request(request, []), lambda out: analysis, pricing)
    if final_answer and not isinstance(analyst, GatewayError):
        # the request's own hold (responses_api holds it, taking this one over): its input the panel answers and
        # the analysis, its output limit the endpoint's maximum when the request sets none, as that hold counts it
        limit = request.max_output_tokens or max(c.endpoint.max_completion_tokens or 0 for c in analyst.candidates)
        final = replace(member, max_output_tokens=limit or DEFAULT_OUTPUT_TOKENS)
        total += _dearest(analyst, final, lambda out: analysis + out, pricing)
    return total


def _dearest(
    plan: RoutePlan | GatewayError,
    request: CanonicalRequest,
    input_tokens: Callable[[int], int],
    pricing: CallerPricing | None = None,
) -> Decimal:
    """A call's worst case: its dearest candidate, billed its input bound (`input_tokens` of the call's output
    bound) and its output bound; with `pricing`, the dearest BYOK candidate at its fee (counted in the month for the
    calls after it, as the charges are: never less than they come to)."""
    if isinstance(plan, GatewayError):
        return Decimal(0)
    costs = [
        (
            c.is_byok,
            max_cost(
                endpoint=c.endpoint,
                input_tokens=input_bound(input_tokens(output_bound(request, c.endpoint)), c.endpoint),
                max_output_tokens=output_bound(request, c.endpoint),
            ),
        )
        for c in plan.candidates
    ]
    if pricing is None:
        return max(cost for _, cost in costs)
    shared = max((cost for byok, cost in costs if not byok), default=Decimal(0))
    byok = max((cost for byok, cost in costs if byok), default=None)
    return shared if byok is None else max(shared, pricing.byok(byok))


def writer_tokens(request: CanonicalRequest, panel: Panel) -> int:
    """The most input tokens the writer's instructions add to the request, as the request's own hold estimates its
    input (4 characters a token): every member answering at most what answers_block shows, the analysis too."""
    shown = shown_chars(request)
    answers = [PanelAnswer(model, "completed", text="x" * shown) for model in panel.models]
    analyses = ({"consensus": ["x" * shown]}, None)  # one cut at `shown`, or none (NO_ANALYSIS: it may be longer)
    longest = max(len(writer_instructions(request, answers, analysis)) for analysis in analyses)
    return (longest - len(request.instructions or "")) // CHARS_PER_TOKEN + 1


# ---- the model slug gateway/fusion -------------------------------------------------------------------------


def panel_hold(
    ctx: RequestContext,
    worst: Decimal,
    *,
    label: str,
    plans: dict[str, RoutePlan | GatewayError],
    list_worst: Callable[[], Decimal],
) -> ReservationHandle | GatewayError:
    """A fusion panel's worst case (worst_cost) held before it runs (routing.side_calls.call_hold: the credits,
    the key's limit and every guardrail budget): two requests, or two runs in one, cannot spend the same credits or
    budget, and a panel they cannot cover never runs. The request's hold or its settlement takes it over. `worst`
    counts a call on the caller's BYOK key at its fee; budgets counting BYOK hold it to its list price
    (`list_worst`), as the request's own hold does."""
    byok = any(c.is_byok for plan in plans.values() if isinstance(plan, RoutePlan) for c in plan.candidates)
    return call_hold(ctx, worst, label=label, cap_worst=list_worst() if byok else None)


def final_hold(request: CanonicalRequest, ctx: RequestContext, panel: Panel) -> Decimal | GatewayError | None:
    """What the request's own hold will need once the panel ran, by that hold's own estimate (ctx.own_hold): the
    analyst writing the final answer, its input the request and the writer's instructions at their longest; or,
    when every member fails, the request sent to the first member as it is. The panel's hold covers it, so that
    hold, taking the panel's over, is never refused after the panel ran. The refusal when the analyst cannot take
    that input; None without a pipeline (worst_cost's own estimate of the final answer then)."""
    if ctx.own_hold is None:
        return None
    try:
        final = ctx.own_hold(request, (panel.analyst,), writer_tokens(request, panel))
    except GatewayError as error:
        return error
    try:
        plain = ctx.own_hold(request, (panel.models[0],), 0)
    except GatewayError:  # that plain request then fails as one would: the panel held nothing for it
        plain = Decimal(0)
    return max(final, plain)
