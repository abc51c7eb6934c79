"""The server tools the gateway runs itself (plugins.server_tools calls them): each takes the model's arguments
(a JSON string), the tool's `parameters` from the request, and returns a ToolResult: the text the model reads and
the output item the caller sees (`gateway:<tool>` items, shaped like the openrouter SDK's `openrouter:<tool>`
items). A tool that cannot do what the model asked returns a failed result the model reads (never an exception).
A tool with progress to report is a generator: it yields its stream events as it runs (a web search's in_progress,
searching, completed; a fusion run's panel and analysis events; None: still working) and returns its result;
`run_tool` keeps them on the item (a buffered stream replays them). `gateway:fusion` runs a fusion panel
(plugins.fusion.tool, registered by plugins.registry: this module never imports the plugins whose tools it runs).
"""

import hashlib
import json
import re
import secrets
import zoneinfo
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal

from gateway.billing.services import ReservationHandle
from plugins import web_engines
from routing.canonical import FunctionTool, Usage
from routing.selectors import models_list
from routing.stages import SERVER_TOOL_RESULT_TOKENS, RequestContext, ServerToolItem, StageEntry

MAX_RESULT_CHARS = SERVER_TOOL_RESULT_TOKENS * 4  # what one result adds to the next round's input, at most
DEFAULT_RESULTS = 5
MAX_RESULTS = 20
MAX_WEB_USES = 50  # searches or fetches per request, per tool (the hard limit)
WORD = re.compile(r"[\w.+-]+")
ID_PREFIX = {
    "gateway:datetime": "dt",
    "gateway:search_models": "sm",
    "gateway:tool_search": "ts",
    "gateway:web_search": "ws",
    "gateway:web_fetch": "wf",
    "gateway:fusion": "fu",
}


@dataclass
class ToolContext:
    """What the tools of one request share: the deferred function tools (tool_search), the ones found so far
    (declared from the next round on), uses per tool, how to charge a tool's own cost and the tokens of its own
    model calls, the request's context (who pays: a fusion run's credit check) and the model that served the first
    round (a fusion run's default analyst)."""

    deferred: list[dict]
    charge: Callable[[Decimal, Usage], None]
    ctx: RequestContext | None = None
    model: str = ""
    found: list[FunctionTool] = field(default_factory=list)
    uses: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # the pages searched or fetched: url -> title
    # Keeps a hold a tool took (a gateway:fusion panel's) for the request's settlement to take over (ToolLoop.keep);
    # None: the tool gives it back itself once it ran (a fusion member's loop, charged by its run).
    keep: Callable[[ReservationHandle], None] | None = None


@dataclass(frozen=True)
class ToolResult:
    for_model: str  # the function_call_output the model reads (JSON)
    item: ServerToolItem  # the output item the caller sees
    entry: StageEntry | None = None  # the tool's own gateway_metadata.pipeline entry (a fusion run's)

    @classmethod
    def failed(cls, kind: str, error: str, **fields) -> "ToolResult":
        item = {"type": kind, "id": new_item_id(kind), "status": "failed", **fields, "error": error}
        return cls(for_model=as_json({"error": error}), item=ServerToolItem(item=item))


def new_item_id(kind: str) -> str:
    return f"{ID_PREFIX.get(kind, 'st')}_{secrets.token_hex(12)}"


def as_json(value) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) > MAX_RESULT_CHARS:  # cut, still readable: the model sees that it was cut
        text = text[: MAX_RESULT_CHARS - 20] + " …[truncated]"
    return text


def _arguments(raw: str) -> dict:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _words(text: str) -> list[str]:
    return [word.lower() for word in WORD.findall(text or "")]


def _count(parameters: dict, name: str, default: int, most: int) -> int:
    value = parameters.get(name)
    return max(1, min(int(value), most)) if isinstance(value, int) and not isinstance(value, bool) else default


# ---- the tools ----------------------------------------------------------------------------------------------


def datetime_tool(args: dict, parameters: dict, tools: ToolContext) -> ToolResult:
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


def search_models_tool(args: dict, parameters: dict, tools: ToolContext) -> ToolResult:
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
    for _, _, model, endpoints in ranked[: _count(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS)]:
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


def tool_search_tool(args: dict, parameters: dict, tools: ToolContext) -> ToolResult:
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
    for _, _, tool in ranked[: _count(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS)]:
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


def _used(tools: ToolContext, kind: str, parameters: dict) -> str | None:
    """A web tool's use counted; the refusal when the request's uses are spent."""
    most = _count(parameters, "max_uses", MAX_WEB_USES, MAX_WEB_USES)
    if tools.uses.get(kind, 0) >= most:
        return f"max_uses ({most}) reached for {kind}: no more calls of it in this request"
    tools.uses[kind] = tools.uses.get(kind, 0) + 1
    return None


def web_search_tool(args: dict, parameters: dict, tools: ToolContext) -> Generator[dict | None, None, ToolResult]:
    kind = "gateway:web_search"
    query = str(args.get("query") or "")[:500]
    action: dict = {"type": "search", "query": query}
    if spent := _used(tools, kind, parameters):
        return ToolResult.failed(kind, spent, action=action)
    yield {"type": "response.web_search_call.in_progress"}
    yield {"type": "response.web_search_call.searching"}
    try:
        outcome = web_engines.search(
            query,
            engine=parameters.get("engine"),
            max_results=_count(parameters, "max_results", DEFAULT_RESULTS, MAX_RESULTS),
            include_domains=parameters.get("allowed_domains") or [],
            exclude_domains=parameters.get("excluded_domains") or [],
        )
    except (web_engines.SearchRefused, web_engines.SearchFailed) as error:
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


def web_fetch_tool(args: dict, parameters: dict, tools: ToolContext) -> ToolResult:
    kind = "gateway:web_fetch"
    url = str(args.get("url") or "")[:4096]
    if spent := _used(tools, kind, parameters):
        return ToolResult.failed(kind, spent, url=url)
    most = SERVER_TOOL_RESULT_TOKENS - 256
    wanted = parameters.get("max_content_tokens")
    try:
        page = web_engines.fetch(
            url,
            max_content_tokens=min(wanted, most) if isinstance(wanted, int) and wanted > 0 else most,
            allowed_domains=parameters.get("allowed_domains"),
            blocked_domains=parameters.get("blocked_domains"),
        )
    except (web_engines.FetchRefused, web_engines.FetchFailed) as error:
        return ToolResult.failed(kind, error.message, url=url)
    tools.sources[page.url] = page.title or page.url
    said = {"url": page.url, "title": page.title, "content": page.text, "truncated": page.truncated}
    item = {
        "type": kind,
        "id": new_item_id(kind),
        "status": "completed",
        "url": page.url,
        "title": page.title,
        "http_status": page.status,
    }
    return ToolResult(for_model=as_json(said), item=ServerToolItem(item=item))


ToolRun = Generator[dict | None, None, ToolResult]


def _no_fields(args: dict, parameters: dict) -> dict:
    return {}


@dataclass(frozen=True)
class Runner:
    """A tool: `run` it; `available` on this gateway; `pending`: the fields its item has while it runs (the
    openrouter SDK's item types require them on the item streamed as added)."""

    run: Callable[[dict, dict, ToolContext], ToolResult | ToolRun]
    available: Callable[[], bool] = lambda: True
    pending: Callable[[dict, dict], dict] = _no_fields


RUNNERS = {
    "gateway:datetime": Runner(
        datetime_tool,
        pending=lambda args, parameters: {
            "datetime": "",
            "timezone": str(args.get("timezone") or parameters.get("timezone") or "UTC")[:64],
        },
    ),
    "gateway:search_models": Runner(search_models_tool),
    "gateway:tool_search": Runner(tool_search_tool),
    "gateway:web_search": Runner(web_search_tool, available=lambda: bool(web_engines.configured_engines())),
    "gateway:web_fetch": Runner(web_fetch_tool),
}


def runner_register(kind: str, runner: Runner) -> None:
    """A tool another plugin runs (gateway:fusion: plugins.registry registers it when the app is ready)."""
    RUNNERS[kind] = runner


def pending_fields(kind: str, arguments: str, parameters: dict) -> dict:
    """The fields a call's item has while it runs."""
    return RUNNERS[kind].pending(_arguments(arguments), parameters)


def run_tool(kind: str, arguments: str, parameters: dict, tools: ToolContext) -> ToolRun:
    """Run one call: its progress events as it yields them, then its result (the events kept on its item)."""
    outcome = RUNNERS[kind].run(_arguments(arguments), parameters, tools)
    if isinstance(outcome, ToolResult):
        return outcome
    events: list[dict] = []
    try:
        while True:
            try:
                event = next(outcome)
            except StopIteration as stop:
                result: ToolResult = stop.value
                return replace(result, item=ServerToolItem(item=result.item.item, progress=tuple(events)))
            if event is not None:
                events.append(event)
            yield event
    finally:
        outcome.close()  # a loop stopped midway (the client left) stops the tool now: what it ran is charged
