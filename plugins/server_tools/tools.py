"""The server tools every request may use, whatever else is configured: gateway:datetime, gateway:search_models
(the catalog) and gateway:tool_search (the request's deferred function tools). plugins.registry registers them."""

import hashlib
import json
import re
import zoneinfo
from datetime import UTC, datetime
from typing import Any

from plugins.common.tools import ToolContext, ToolResult, as_json, count_param, new_item_id
from routing.canonical import FunctionTool
from routing.selectors import models_list
from routing.stages import ServerToolItem

DEFAULT_RESULTS = 5
MAX_RESULTS = 20
WORD = re.compile(r"[\w.+-]+")


def _words(text: str) -> list[str]:
    return [word.lower() for word in WORD.findall(text or "")]


def datetime_tool(args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext) -> ToolResult:
    kind = "gateway:datetime"
    name = str(args.get("timezone") or parameters.get("timezone") or "UTC")
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return ToolResult.failed(
            kind,
            f"unknown timezone {name[:64]!r}: use an IANA name such as Europe/Paris",
            datetime="",
            timezone=name[:64],
        )
    now = datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")
    item = {"type": kind, "id": new_item_id(kind), "status": "completed", "datetime": now, "timezone": name}
    return ToolResult(for_model=as_json({"datetime": now, "timezone": name}), item=ServerToolItem(item=item))


def search_models_tool(args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext) -> ToolResult:
    """The catalog's models (routing.selectors) ranked by how many of the query's words their id, name,
    description and providers contain."""
    kind = "gateway:search_models"
    query = str(args.get("query") or "")[:500]
    words = _words(query)
    if not words:
        return ToolResult.failed(
            kind, "query is required: words to look for in model names and descriptions", query=query
        )
    ranked = []
    for model in models_list():
        endpoints = getattr(model, "live_endpoints", [])
        haystack = " ".join([model.id, model.name, model.description, *(e.provider.slug for e in endpoints)]).lower()
        score = sum(word in haystack for word in words)
        if score:
            ranked.append((-score, model.id, model, endpoints))
    ranked.sort(key=lambda entry: entry[:2])
    found = []
    for _, _, model, endpoints in ranked[: count_param(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS)]:
        cheapest = endpoints[0] if endpoints else None
        found.append(
            {
                "id": model.id,
                "name": model.name,
                "description": model.description[:300],
                "context_length": model.context_length,
                "input_modalities": model.input_modalities,
                "providers": sorted({e.provider.slug for e in endpoints}),
                "pricing_per_million_tokens": {
                    "prompt": str(cheapest.price_prompt),
                    "completion": str(cheapest.price_completion),
                }
                if cheapest
                else None,
            }
        )
    arguments = as_json({"query": query})
    item = {"type": kind, "id": new_item_id(kind), "status": "completed", "query": query, "arguments": arguments}
    return ToolResult(for_model=as_json({"models": found}), item=ServerToolItem(item=item))


def tool_search_tool(args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext) -> ToolResult:
    """The deferred function tools (defer_loading) whose name or description has the query's words; the ones
    found are declared to the model from the next round on."""
    kind = "gateway:tool_search"
    query = str(args.get("query") or "")[:500]
    words = _words(query)
    ranked = []
    for tool in tools.deferred:
        haystack = f"{tool['name']} {tool['name'].replace('_', ' ')} {tool.get('description') or ''}".lower()
        score = sum(word in haystack for word in words)
        if score:
            ranked.append((-score, tool["name"], tool))
    ranked.sort(key=lambda entry: entry[:2])
    matches, definitions = [], []
    known = {tool.name for tool in tools.found}
    for _, _, tool in ranked[: count_param(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS)]:
        definition = {
            key: tool[key]
            for key in ("type", "name", "description", "parameters", "strict")
            if tool.get(key) is not None
        }
        digest = hashlib.sha256(json.dumps(tool.get("parameters"), sort_keys=True).encode()).hexdigest()[:16]
        matches.append({"tool_id": tool["name"], "definition": definition, "schema_digest": digest})
        definitions.append(definition)
        if tool["name"] not in known:
            tools.found.append(
                FunctionTool(
                    name=tool["name"],
                    description=tool.get("description"),
                    parameters=tool.get("parameters"),
                    strict=tool.get("strict"),
                )
            )
    item = {"type": kind, "id": new_item_id(kind), "status": "completed", "query": query, "matches": matches}
    said = {"tools": definitions} if definitions else {"tools": [], "note": "no tool matches; try other words"}
    return ToolResult(for_model=as_json(said), item=ServerToolItem(item=item))


def datetime_pending(args: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    return {"datetime": "", "timezone": str(args.get("timezone") or parameters.get("timezone") or "UTC")[:64]}
