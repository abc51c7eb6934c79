"""The models a router may choose from: the catalog's chat models with an endpoint the caller may use (its
guardrails and its account's routing settings) and that is routable for it (routing.selection.Routable: a
credential to call it with), their quality data (routing.models: task_scores, coding_score),
their price (the cheapest such endpoint) and this deployment's own usage (generation records)."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models import Sum
from django.utils import timezone

from gateway.billing.models import Generation
from plugins.common.caller import caller_limits
from routing.catalog import EndpointInfo
from routing.limits import model_matches
from routing.selection import Routable, RoutingCaller, unhonoured
from routing.selectors import chat_model_quality, endpoints_for_model
from routing.snapshot import current_snapshot
from routing.stages import RequestContext

USAGE_WINDOW = timedelta(days=7)
USAGE_CACHE_SECONDS = 300
DEFAULT_TOKEN_MIX = (3, 1)  # input : output tokens when this deployment has no records yet (weighted_avg)


@dataclass(frozen=True)
class ModelChoice:
    id: str
    endpoints: tuple[EndpointInfo, ...]  # the ones the caller may use, cheapest first
    task_scores: dict[str, Any]
    coding_score: float | None
    context_length: int
    input_modalities: tuple[str, ...]

    @property
    def cheapest(self) -> EndpointInfo:
        return min(self.endpoints, key=lambda e: (e.price_prompt, e.price_completion, e.id))

    @property
    def price(self) -> Decimal:
        """USD per million tokens, prompt + completion, of the cheapest endpoint (the cost bands' measure)."""
        return self.cheapest.price_prompt + self.cheapest.price_completion

    @property
    def prompt_price(self) -> Decimal:
        return min(e.price_prompt for e in self.endpoints)

    def weighted_price(self, mix: tuple[int, int]) -> Decimal:
        total = mix[0] + mix[1] or 1
        return min((e.price_prompt * mix[0] + e.price_completion * mix[1]) / total for e in self.endpoints)

    def task_score(self, task_type: str) -> float:
        """The model's score for the task; without one, its mean over the types it has, halved (unknown is
        ranked below known)."""
        score = self.task_scores.get(task_type)
        if score is not None:
            return float(score)
        known = [float(v) for v in self.task_scores.values()]
        return sum(known) / len(known) / 2 if known else 0.0


def chat_models(
    ctx: RequestContext,
    *,
    estimated_tokens: int = 0,
    needs_image: bool = False,
    exclude: frozenset[str] = frozenset(),
    params: frozenset[str] = frozenset(),
) -> list[ModelChoice]:
    """Every chat model the caller could route to now (sorted by id), with its quality data; only endpoints that
    honour the request's `params` (request_params) count."""
    limits = caller_limits(ctx)
    snapshot = current_snapshot()
    # A model no provider has credentials for cannot answer: ranked, it would be chosen and fail (404).
    routable = Routable(RoutingCaller.of(ctx.caller), snapshot=snapshot)
    rows = chat_model_quality()
    choices = []
    for model_id, task_scores, coding_score, context_length, modalities in rows:
        if model_id in exclude or (needs_image and "image" not in (modalities or ())):
            continue
        usable = tuple(
            endpoint
            for endpoint in endpoints_for_model(model_id=model_id, snapshot=snapshot)
            if not any(limit.excludes(endpoint) for limit in limits)
            and not (endpoint.context_length and estimated_tokens > endpoint.context_length)
            and not unhonoured(endpoint, params)
            and routable(endpoint)
        )
        if usable:
            choices.append(
                ModelChoice(
                    id=model_id,
                    endpoints=usable,
                    task_scores=dict(task_scores or {}),
                    coding_score=coding_score,
                    context_length=context_length,
                    input_modalities=tuple(modalities or ()),
                )
            )
    return sorted(choices, key=lambda c: c.id)


def restricted(
    models: list[ModelChoice], *, allowed: list[str] | None, excluded: list[str] | None
) -> list[ModelChoice]:
    """`allowed_models` first (none given: all), then `excluded_models` (exclusion wins); wildcards as in
    `anthropic/*`."""
    if allowed:
        models = [m for m in models if any(model_matches(pattern, m.id) for pattern in allowed)]
    if excluded:
        models = [m for m in models if not any(model_matches(pattern, m.id) for pattern in excluded)]
    return models


def percentiles(models: list[ModelChoice]) -> dict[str, float]:
    """Each model's price percentile among `models` (0 = cheapest): its rank by price / count * 100."""
    ordered = sorted(models, key=lambda m: (m.price, m.id))
    count = len(ordered)
    return {m.id: 100.0 * index / count for index, m in enumerate(ordered)}


def usage_shares(task_type: str) -> dict[str, float]:
    """This deployment's share of successful spend per model on `task_type` over the last 7 days (from the
    generation records' `router.task_type`), cached for 5 minutes."""
    key = f"routers:usage-share:{task_type}"
    found = cache.get(key)
    if found is not None:
        return found
    since = timezone.now() - USAGE_WINDOW
    spend = (
        Generation.objects.filter(created_at__gte=since, status="completed", router__task_type=task_type)
        .exclude(model="")
        .values("model")
        .annotate(total=Sum("cost"))
    )
    totals = {row["model"]: float(row["total"] or 0) for row in spend}
    whole = sum(totals.values())
    shares = {model: total / whole for model, total in totals.items()} if whole > 0 else {}
    cache.set(key, shares, USAGE_CACHE_SECONDS)
    return shares


def token_mix() -> tuple[int, int]:
    """This deployment's input : output token mix over the last 7 days (pareto-router's weighted_avg price),
    cached for 5 minutes; DEFAULT_TOKEN_MIX without records."""
    key = "routers:token-mix"
    found = cache.get(key)
    if found is not None:
        return int(found[0]), int(found[1])
    since = timezone.now() - USAGE_WINDOW
    sums = Generation.objects.filter(created_at__gte=since, status="completed").aggregate(
        i=Sum("tokens_input"), o=Sum("tokens_output")
    )
    mix = (int(sums["i"] or 0), int(sums["o"] or 0))
    if not any(mix):
        mix = DEFAULT_TOKEN_MIX
    cache.set(key, list(mix), USAGE_CACHE_SECONDS)
    return mix
