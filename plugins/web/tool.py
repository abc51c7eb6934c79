"""The server tool gateway:web_search: one search through the operator's engines (plugins.web.search), its results
what the model reads, its price charged with the request. plugins.registry registers it."""

from collections.abc import Generator
from decimal import Decimal
from typing import Any

from plugins.common.tools import ToolContext, ToolResult, as_json, count_param, new_item_id, use_count
from plugins.web.search import SearchFailed, SearchRefused, configured_engines, engine_price, search
from routing.canonical import Usage
from routing.stages import ServerToolItem

DEFAULT_RESULTS = 5
MAX_RESULTS = 20


def web_search_tool(
    args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext
) -> Generator[dict[str, Any] | None, None, ToolResult]:
    kind = "gateway:web_search"
    query = str(args.get("query") or "")[:500]
    action: dict[str, Any] = {"type": "search", "query": query}
    if spent := use_count(tools, kind, parameters):
        return ToolResult.failed(kind, spent, action=action)
    yield {"type": "response.web_search_call.in_progress"}
    yield {"type": "response.web_search_call.searching"}
    try:
        outcome = search(
            query,
            engine=parameters.get("engine"),
            max_results=count_param(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS),
            include_domains=parameters.get("allowed_domains") or [],
            exclude_domains=parameters.get("excluded_domains") or [],
        )
    except (SearchRefused, SearchFailed) as error:
        return ToolResult.failed(kind, error.message, action=action)
    tools.charge(outcome.cost_usd, Usage())
    tools.sources.update((r.url, r.title) for r in outcome.results)
    results = [
        {"title": r.title, "url": r.url, "snippet": r.snippet, **({"published": r.published} if r.published else {})}
        for r in outcome.results
    ]
    action["sources"] = [{"type": "url", "url": r.url} for r in outcome.results]
    yield {"type": "response.web_search_call.completed"}
    item = {"type": kind, "id": new_item_id(kind), "status": "completed", "action": action}
    return ToolResult(for_model=as_json({"query": outcome.query, "results": results}), item=ServerToolItem(item=item))


def web_search_available() -> bool:
    return bool(configured_engines())


def web_search_price(parameters: dict[str, Any]) -> Decimal:
    """The most one search costs: its engine's price, the dearest configured engine's when it names none."""
    engines = [parameters["engine"]] if parameters.get("engine") else list(configured_engines())
    return max((engine_price(engine) for engine in engines), default=Decimal(0))
