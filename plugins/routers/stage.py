"""The router stage: the model slugs `gateway/auto`, `gateway/auto-beta` (auto-router, auto-beta-router),
`gateway/pareto-code` (pareto-router) and `gateway/fusion` (fusion) choose the models the rest of the pipeline
plans (this package: the classifier, the candidates and their quality data, auto and pareto; gateway/fusion runs
the fusion plugin's stage, registered in ROUTER_RUNS by plugins.registry). The
decision is the pipeline entry (`gateway_metadata.pipeline`), `gateway_metadata.strategy`, and the generation
record's `router`. A router's plugin entry configures it; an entry for a router the request does not use is
refused (400), except auto-router settings on gateway/auto-beta and the other way round (ignored, as the spec
says, and noted in the entry)."""

from dataclasses import replace
from decimal import Decimal
from typing import Any, Protocol

from plugins.common.caller import caller_limits, request_params
from plugins.common.config import plugin_settings
from plugins.routers import auto, pareto
from routing.canonical import CanonicalRequest
from routing.limits import RoutingLimit
from routing.stages import Block, RequestContext, Staged, StageEntry

SLUGS = {
    "gateway/auto": "auto-router",
    "gateway/auto-beta": "auto-beta-router",
    "gateway/pareto-code": "pareto-router",
    "gateway/fusion": "fusion",
}
STRATEGIES = {"auto-router": "auto", "auto-beta-router": "auto", "pareto-router": "pareto", "fusion": "fusion"}
MSG_NOT_FIRST = "{slug} is a router: it must be the request's model, not one of its fallback models"
MSG_UNUSED_PLUGIN = (
    "plugins[{index}]: the {id} plugin configures the model {slug}; request model {slug} to use it (or remove it)"
)
MSG_TURNED_OFF = "The model {slug} is the {id} plugin, which this request turns off (enabled: false)"


class RouterRun(Protocol):
    def __call__(
        self,
        request: CanonicalRequest,
        ctx: RequestContext,
        *,
        options: dict[str, Any],
        limits: tuple[RoutingLimit, ...],
    ) -> Staged | Block: ...


# The routers another plugin runs (gateway/fusion: the fusion plugin's stage), by plugin id: plugins.registry
# registers them when the app is ready, so that this plugin never imports the other.
ROUTER_RUNS: dict[str, RouterRun] = {}


def router_register(plugin_id: str, run: RouterRun) -> None:
    ROUTER_RUNS[plugin_id] = run


class RouterStage:
    type = "request_plugin"
    name = "routers"
    plugin_ids: tuple[str, ...] = tuple(SLUGS.values())

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        models = list(ctx.models)
        slug = models[0] if models and models[0] in SLUGS else None
        for model in models[1:]:
            if model in SLUGS:
                return Block(MSG_NOT_FIRST.format(slug=model), status=400)
        for index, entry in enumerate(ctx.plugins):
            owner = next((s for s, pid in SLUGS.items() if pid == entry["id"]), None)
            if owner is None or not entry.get("enabled", True) or slug == owner:
                continue
            if {slug, owner} == {"gateway/auto", "gateway/auto-beta"}:
                continue  # the other auto router's settings: ignored (noted in the entry)
            return Block(MSG_UNUSED_PLUGIN.format(index=index, id=entry["id"], slug=owner), status=400)
        if slug is None:
            return Staged(request=request)  # no router asked for: nothing in the pipeline
        plugin_id = SLUGS[slug]
        options = plugin_settings(ctx, plugin_id)
        if options is None and any(p["id"] == plugin_id for p in ctx.plugins):
            return Block(MSG_TURNED_OFF.format(slug=slug, id=plugin_id), status=400)
        options = options or {}
        if plugin_id in ROUTER_RUNS:
            result = ROUTER_RUNS[plugin_id](request, ctx, options=options, limits=caller_limits(ctx))
        elif plugin_id == "pareto-router":
            result = _pareto(request, ctx, options)
        else:
            result = _auto(request, ctx, slug, plugin_id, options)
        if isinstance(result, Staged) and models[1:]:  # the caller's own fallback models come after the router's
            result = replace(result, models=tuple(dict.fromkeys((*result.models, *models[1:]))))
        return result


def _auto(
    request: CanonicalRequest, ctx: RequestContext, slug: str, plugin_id: str, options: dict[str, Any]
) -> Staged | Block:
    other = "auto-beta-router" if plugin_id == "auto-router" else "auto-router"
    ignored = [other] if any(p["id"] == other for p in ctx.plugins) else []
    try:
        choice = auto.auto_route(request, ctx, slug=slug, options=options, limits=caller_limits(ctx))
    except auto.NoModels as refused:
        return Block(str(refused), status=404, entries=(_entry(plugin_id, "no_models", {}),))
    classified = choice.classified
    data = {
        "task_type": classified.task_type,
        "classifier": classified.classifier,
        **({"classifier_note": classified.note} if classified.note else {}),
        "candidates": choice.candidates[:20],
        "candidate_count": len(choice.candidates),
        **{k: v for k, v in choice.settings.items() if k != "task_type"},
        "chosen": choice.models[0],
        "fallbacks": list(choice.models[1:]),
        "reason": choice.reason,
        **({"ignored_settings": ignored} if ignored else {}),
    }
    cost = classified.cost_usd
    entry = _entry(plugin_id, f"routed to {choice.models[0]} ({classified.task_type})", data, cost)
    record = {k: data[k] for k in ("task_type", "classifier", "chosen", "fallbacks", "reason")}
    return Staged(
        request=request,
        models=choice.models,
        strategy="auto",
        entries=(entry,),
        cost_usd=cost,
        record={"router": {"strategy": "auto", "plugin": plugin_id, **record, "cost_usd": float(cost)}},
        holds=classified.holds,  # the classifier call's: the request's own hold takes it over
    )


def _pareto(request: CanonicalRequest, ctx: RequestContext, options: dict[str, Any]) -> Staged | Block:
    try:
        choice = pareto.pareto_route(ctx, options=options, params=request_params(request))
    except pareto.NoModels as refused:
        return Block(str(refused), status=404, entries=(_entry("pareto-router", "no_models", {}),))
    data = {
        "tier": choice.tier,
        "candidates": choice.candidates[:20],
        "price_source": options.get("price_source") or "prompt",
        **({"max_price": options["max_price"]} if options.get("max_price") is not None else {}),
        **({"min_coding_score": options["min_coding_score"]} if options.get("min_coding_score") is not None else {}),
        "nitro": ctx.suffix == "nitro",
        "sticky": choice.sticky,
        "chosen": choice.models[0],
        "fallbacks": list(choice.models[1:]),
        "reason": choice.reason,
    }
    entry = _entry("pareto-router", f"routed to {choice.models[0]} ({choice.tier})", data)
    record = {k: data[k] for k in ("tier", "chosen", "fallbacks", "reason", "sticky")}
    return Staged(
        request=request,
        models=choice.models,
        strategy="pareto",
        entries=(entry,),
        record={"router": {"strategy": "pareto", "plugin": "pareto-router", **record}},
    )


def _entry(plugin_id: str, outcome: str, data: dict[str, Any], cost: Decimal | None = None) -> StageEntry:
    return StageEntry(type="request_plugin", name=plugin_id, outcome=outcome, data=data, cost_usd=cost)
