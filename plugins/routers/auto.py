"""auto-router (`gateway/auto`) and auto-beta-router (`gateway/auto-beta`): classify the request's task type, rank
the candidate models for it, keep the price band (`cost_tier`) or weigh quality against price
(`cost_quality_tradeoff`), and choose; `pin_model` keeps a session on the model that served its latest
assistant turn."""

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from gateway.billing.models import Generation
from plugins.common.caller import caller_prefs, request_params
from plugins.routers.candidates import ModelChoice, chat_models, percentiles, restricted, usage_shares
from plugins.routers.classify import Classified, classify, latest_user_text
from routing.canonical import CanonicalRequest, Message
from routing.limits import RoutingLimit
from routing.stages import RequestContext

MSG_NO_MODELS = "No models match your request and model restrictions"
COST_TIERS = {"low": (0, 20), "medium": (20, 40), "high": (40, 60), "xhigh": (60, 80), "max": (80, 100.0001)}
DEFAULT_TRADEOFF = 9
MAX_FALLBACKS = 2


class NoModels(Exception):
    pass


@dataclass
class AutoChoice:
    classified: Classified
    models: tuple[str, ...]
    reason: str
    candidates: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


def ranking() -> str:
    """settings.AUTO_ROUTER_RANKING: `benchmarks` (the catalog's task scores) or `usage` (this deployment's
    share of successful spend per task type over 7 days, the scores breaking ties and ranking the unused)."""
    return "usage" if getattr(settings, "AUTO_ROUTER_RANKING", "benchmarks") == "usage" else "benchmarks"


def pinned_model(ctx: RequestContext, slug: str, request: CanonicalRequest) -> str | None:
    """The model that served this session's latest assistant turn through `slug`: the newest completed
    generation of the caller's account with this session id and requested model (the caller sends
    `session_id` / X-Session-Id and its conversation so far). None without a session or an assistant turn."""
    if not ctx.session_id or not any(isinstance(i, Message) and i.role == "assistant" for i in request.input):
        return None
    return (
        Generation.objects.filter(
            account_id=ctx.caller.account_id, session_id=ctx.session_id, requested_model=slug, status="completed"
        )
        .exclude(model="")
        .order_by("-created_at")
        .values_list("model", flat=True)
        .first()
    )


def auto_route(
    request: CanonicalRequest,
    ctx: RequestContext,
    *,
    slug: str,
    options: dict[str, Any],
    limits: tuple[RoutingLimit, ...],
) -> AutoChoice:
    _, has_image = latest_user_text(request)
    estimated = sum(len(getattr(p, "text", "") or "") for i in request.input for p in getattr(i, "content", ())) // 4
    models = restricted(
        chat_models(ctx, estimated_tokens=estimated, needs_image=has_image, params=request_params(request)),
        allowed=options.get("allowed_models"),
        excluded=options.get("excluded_models"),
    )
    if not models:  # refused before the classifier (a paid call) runs
        raise NoModels(MSG_NO_MODELS)
    classified = classify(request, limits=limits, prefs=caller_prefs(ctx), ctx=ctx)
    task = classified.task_type
    shares = usage_shares(task) if ranking() == "usage" else {}

    def quality(m: ModelChoice) -> tuple[float, float]:
        return (shares.get(m.id, 0.0), m.task_score(task))

    ranked = sorted(models, key=lambda m: (quality(m), -m.price), reverse=True)
    chosen_settings: dict[str, Any] = {"task_type": task, "ranking": ranking()}
    pin = options.get("pin_model") and slug == "gateway/auto"
    if pin:
        previous = pinned_model(ctx, slug, request)
        if previous and any(m.id == previous for m in ranked):
            rest = [m.id for m in ranked if m.id != previous][:MAX_FALLBACKS]
            return AutoChoice(
                classified,
                (previous, *rest),
                "pin_model: the model of the session's latest assistant turn",
                [m.id for m in ranked],
                {**chosen_settings, "pin_model": True},
            )
    pct = percentiles(models)
    tier = options.get("cost_tier")
    if tier:
        low, high = COST_TIERS[tier]
        band = [m for m in ranked if low <= pct[m.id] < high]
        reason = f"best for {task} in cost tier {tier} (price percentile [{low}, {min(high, 100):g}))"
        if not band:  # fewer candidates than bands: the ones nearest the band
            middle = (low + min(high, 100)) / 2
            nearest = min(abs(pct[m.id] - middle) for m in ranked)
            band = [m for m in ranked if abs(pct[m.id] - middle) == nearest]
            reason += ": none inside, the nearest"
        chosen = band[: 1 + MAX_FALLBACKS]
        chosen_settings["cost_tier"] = tier
    else:
        tradeoff = options.get("cost_quality_tradeoff")
        tradeoff = DEFAULT_TRADEOFF if tradeoff is None else tradeoff

        def merit(m: ModelChoice) -> float:  # usage share first when ranking by usage, the score breaking ties
            return shares.get(m.id, 0.0) + m.task_score(task) / 1000 if shares else m.task_score(task)

        best = max(merit(m) for m in models) or 1.0

        def value(m: ModelChoice) -> float:
            weight = tradeoff / 10
            return (1 - weight) * (merit(m) / best) + weight * (1 - pct[m.id] / 100)

        chosen = sorted(ranked, key=lambda m: (value(m), quality(m)), reverse=True)[: 1 + MAX_FALLBACKS]
        reason = f"best for {task} at cost_quality_tradeoff {tradeoff} (0 = quality, 10 = price)"
        chosen_settings["cost_quality_tradeoff"] = tradeoff
    if pin:
        reason += "; pin_model: no earlier turn of this session to pin"
    return AutoChoice(classified, tuple(m.id for m in chosen), reason, [m.id for m in ranked], chosen_settings)
