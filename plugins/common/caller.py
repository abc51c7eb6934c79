"""The caller, as a plugin's own model calls see it: its guardrails' and account's limits on endpoints, its provider
preferences, and the request's parameters the endpoints must honour (the routers' choices and a fusion panel's
plans alike)."""

from routing.canonical import CanonicalRequest
from routing.limits import RoutingLimit, limits_for
from routing.preferences import Preferences, account_defaults, preferences_build
from routing.snapshot import current_snapshot
from routing.stages import RequestContext


def request_params(request: CanonicalRequest) -> frozenset[str]:
    """The request's parameters as responses_api.normalize.used_parameters names them, from the canonical request:
    what a router's choice and a fusion panel's plans must honour too (routing.selection.unhonoured: stop
    sequences, seed, logprobs, a JSON schema), never sent to an endpoint that drops them."""
    used = {
        name
        for name in ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "seed", "top_logprobs")
        if getattr(request, name) is not None
    }
    used |= {"stop"} if request.stop else set()
    used |= {"logprobs"} if request.logprobs else set()
    used |= {"max_tokens"} if request.max_output_tokens is not None else set()
    kind = (request.text_format or {}).get("type")
    used |= {"response_format"} if kind in ("json_object", "json_schema") else set()
    used |= {"structured_outputs"} if kind == "json_schema" else set()
    used |= {"verbosity"} if request.verbosity else set()
    return frozenset(used)


def caller_prefs(ctx: RequestContext) -> Preferences:
    """The request's provider preferences within the account's defaults, as the request's own plan has them
    (responses_api.service.response_plan): where a plugin's own calls with the caller's text may go."""
    account = account_defaults(account_id=ctx.caller.account_id, snapshot=current_snapshot())
    return preferences_build(provider=ctx.provider, route=None, service_tier=None, suffix=None, account=account)


def caller_limits(ctx: RequestContext) -> tuple[RoutingLimit, ...]:
    """The caller's guardrails and its account's routing settings, as limits on endpoints."""
    defaults = account_defaults(account_id=ctx.caller.account_id, snapshot=current_snapshot())
    account = RoutingLimit(
        source="the account's routing settings",
        allowed_providers=defaults.allowed_providers or None,
        ignored_providers=defaults.ignored_providers or None,
        zdr=defaults.enforce_zdr,
        deny_data_collection=defaults.data_collection == "deny",
    )
    return limits_for(ctx.caller) + ((account,) if account != RoutingLimit(source=account.source) else ())
