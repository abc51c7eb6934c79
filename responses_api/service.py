"""The steps of POST /responses before its attempts, which responses_api.pipeline calls: normalize, plan, hold
(`response_*`, the hold taking the request's state: responses_api.run.ResponseRun), and the charge of a request
refused after paid checks ran."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from decimal import Decimal

from gateway.accounts.authentication import Caller
from gateway.billing import services as credits
from gateway.billing.fees import byok_month_to_date, hold_amount
from gateway.billing.records import blocked_record
from gateway.errors import GatewayError
from responses_api import stages
from responses_api.metadata import attach_error_metadata, gateway_metadata, requested_models
from responses_api.normalize import Prepared, prepare, truncate_to_fit
from responses_api.run import ResponseRun
from routing.catalog import EndpointInfo
from routing.health import sticky_get, sticky_key
from routing.preferences import account_defaults, preferences_build, split_model_suffix
from routing.pricing_hold import hold_list_cost
from routing.selection import RoutePlan, RoutingCaller, endpoints_for_request
from routing.selectors import endpoints_for_model
from routing.snapshot import current_snapshot
from routing.stages import RequestContext

logger = logging.getLogger(__name__)
MSG_PROMPT_NOT_FOUND = "Prompt {id} not found: this gateway stores no prompt templates"


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
    cap_amount = None  # what a budget counting BYOK spends: the list price on a key too
    if byok_counted:
        cap_amount = _reservation_amount(plan=plan, prepared=prepared, caller=ctx.caller, list_price=True)
    reservation = credits.credits_reserve(
        account_id=ctx.caller.account_id,
        amount=amount,
        api_key_id=ctx.caller.key_id,
        key_has_limit=ctx.caller.has_limit,
        caps=prepared.caps,
        cap_amount=cap_amount,
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
    record = blocked_record(
        generation_id=reservation.id,
        caller=ctx.caller,
        session_id=ctx.session_id,
        requested_model=",".join(prepared.models)[:256],
        cost=cost,
        streamed=prepared.canonical.stream,
        stage_record=prepared.record,
    )
    credits.generation_settle(reservation=reservation, record=record, charge=True)


def _reservation_amount(*, plan: RoutePlan, prepared: Prepared, caller: Caller, list_price: bool = False) -> Decimal:
    """The worst case over the candidates: list price on shared capacity, the BYOK fee on a key (its list price
    with `list_price`: what a budget counting BYOK spends)."""
    list_costs = [
        (
            hold_list_cost(
                endpoint=candidate.endpoint,
                request=prepared.canonical,
                estimated_input_tokens=prepared.estimated_input_tokens,
                server_rounds=prepared.server_rounds,
            ),
            candidate.is_byok,
        )
        for candidate in plan.candidates
    ]
    month_to_date = None
    if not list_price and any(is_byok for _, is_byok in list_costs):
        month_to_date = byok_month_to_date(account_id=caller.account_id)
    return hold_amount(list_costs, plan=caller.plan, month_to_date=month_to_date)


def _tools_hold(prepared: Prepared) -> Decimal:
    return stages.tools_hold(prepared.data, prepared.server_rounds)


def _catalog_endpoints(models: list[str]) -> list[EndpointInfo]:
    return [endpoint for model in models for endpoint in endpoints_for_model(model_id=model)]
