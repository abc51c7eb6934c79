"""pareto-router (`gateway/pareto-code`): coding-score tiers, the cheapest model of the tier (or the fastest by
p50 latency with `:nitro`) plus up to two fallbacks of the same tier; `max_price` bypasses the tiers; a
session stays on its choice for 5 minutes."""

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.cache import cache

from plugins.routers.candidates import ModelChoice, chat_models, token_mix
from routing.health import EndpointStats, endpoint_stats
from routing.stages import RequestContext

TIERS = (("high", 0.66), ("medium", 0.33), ("low", 0.0))
STICKY_SECONDS = 300
MAX_FALLBACKS = 2
MSG_NO_CODING_MODELS = "No models match your request and model restrictions (no model has a coding score)"
MSG_OVER_PRICE = "No model is priced at or under max_price ({price} USD per million input tokens)"


class NoModels(Exception):
    pass


@dataclass
class ParetoChoice:
    models: tuple[str, ...]
    tier: str
    reason: str
    candidates: list[str]
    sticky: bool = False


def tier_of(score: float) -> str:
    return next(name for name, floor in TIERS if score >= floor)


def _sticky_key(ctx: RequestContext, options: dict[str, Any]) -> str:
    settings_digest = json.dumps({k: options.get(k) for k in ("max_price", "min_coding_score", "price_source")})
    raw = f"{ctx.caller.account_id}:{ctx.session_id}:{ctx.suffix}:{settings_digest}"
    return "routers:pareto:" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def p50_latency(model: ModelChoice, stats: dict[int, EndpointStats]) -> float:
    """The best p50 latency (seconds) over the model's endpoints; infinity without samples."""
    values = [latency["p50"] for e in model.endpoints if e.id in stats and (latency := stats[e.id].latency)]
    return min(values, default=float("inf"))


def pareto_route(ctx: RequestContext, *, options: dict[str, Any], params: frozenset[str] = frozenset()) -> ParetoChoice:
    """The choice for the options; only endpoints that honour the request's `params`
    (plugins.common.caller.request_params)."""
    models = [m for m in chat_models(ctx, params=params) if m.coding_score is not None]
    if not models:
        raise NoModels(MSG_NO_CODING_MODELS)
    source = options.get("price_source") or "prompt"
    mix = token_mix() if source == "weighted_avg" else (1, 0)

    def price(m: ModelChoice) -> Decimal:
        return m.weighted_price(mix) if source == "weighted_avg" else m.prompt_price

    key = _sticky_key(ctx, options) if ctx.session_id else ""
    if key and (stuck := cache.get(key)) and (chosen := next((m for m in models if m.id == stuck[0]), None)):
        others = [m.id for m in models if m.id in stuck[1:]]
        return ParetoChoice(
            (chosen.id, *others),
            stuck_tier(chosen),
            "session: the choice of the last 5 minutes",
            [m.id for m in models],
            sticky=True,
        )
    max_price = options.get("max_price")
    if max_price is not None:
        under = [m for m in models if m.prompt_price <= max_price]
        if not under:
            raise NoModels(MSG_OVER_PRICE.format(price=max_price))
        ranked = sorted(under, key=lambda m: (-(m.coding_score or 0), price(m), m.id))
        choice = ParetoChoice(
            tuple(m.id for m in ranked[: 1 + MAX_FALLBACKS]),
            "max_price",
            f"best coding score at or under max_price {max_price}",
            [m.id for m in ranked],
        )
    else:
        floor = options.get("min_coding_score")
        wanted = "high" if floor is None else tier_of(floor)
        names = [name for name, _ in TIERS]
        pool: list[ModelChoice] = []
        tier = wanted
        for tier in names[: names.index(wanted) + 1][::-1]:  # the wanted tier, else the next one up
            pool = [m for m in models if tier_of(m.coding_score or 0) == tier]
            if pool:
                break
        if not pool:
            raise NoModels(MSG_NO_CODING_MODELS)
        if ctx.suffix == "nitro":
            stats = endpoint_stats([e.id for m in pool for e in m.endpoints])
            ranked = sorted(pool, key=lambda m: (p50_latency(m, stats), price(m), m.id))
            reason = f"fastest p50 latency in the {tier} coding tier (:nitro)"
        else:
            ranked = sorted(pool, key=lambda m: (price(m), -(m.coding_score or 0), m.id))
            reason = f"cheapest in the {tier} coding tier by {source} price"
        if tier != wanted:
            reason += f" (no model in the {wanted} tier)"
        choice = ParetoChoice(tuple(m.id for m in ranked[: 1 + MAX_FALLBACKS]), tier, reason, [m.id for m in ranked])
    if key:
        cache.set(key, list(choice.models), STICKY_SECONDS)
    return choice


def stuck_tier(model: ModelChoice) -> str:
    return tier_of(model.coding_score or 0)
