"""web: a web search before the model answers, and the answer's citations.

WebStage (pre-stage) runs when the request's `web` plugin entry (or the account's default) is on, or the first
requested model carries the `:online` suffix. It searches with the text of the last user message, through the
entry's `engine` (else the operator's default engine: plugins.web.search), `max_results` (default 5),
`include_domains` / `exclude_domains` (`example.com`, `*.example.com`, `example.com/blog`), and adds the results
to that message, introduced by `search_prompt` or the default prompt (dated: the model knows when the search
was made, and is asked to cite the sources as markdown links named by their domain). The engine's price per
search is charged with the request; the generation record gets `num_search_results` and `web_search_engine`.
A search that cannot be made as asked is a 400 (engine not configured, a bad domain pattern), an engine that
fails is a 502: the model is never called without the search it was promised.

`engine: "native"` is the provider's own web search (routing.providers.hosted): the plugin adds a `web_search` tool
(include / exclude domains as its allowed / blocked domains) and routing keeps the endpoints of the model that run
it as asked (catalog `hosted_tools`, the adapter able to send it: OpenAI allows domains, Anthropic allows or blocks
them, Chat Completions search models take no filters); none is a 400, and so are max_results and search_prompt,
which only the gateway's engines have. `engine` unset: native when such an endpoint exists, else the default engine.
The provider's searches are billed at the endpoint's web_search price (usage.web_search_requests), its citations are
the answer's url_citation annotations already, and the record gets the pages it found and `web_search_engine:
native`.

WebCitationStage (post-stage) turns the answer's markdown links to the search results' pages (the same URL, or
another page of a result's site) into `url_citation` annotations on the output_text (the flat Responses shape
`{type, url, title, start_index, end_index}`, indices in characters of the text, covering the whole link).

The `web-fetch` plugin is the `gateway:web_fetch` server tool's switch and settings: the server-tool loop
(plugins/server_tools/) honours it, not these stages."""

import re
import secrets
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from gateway.billing.services import hold_drop
from gateway.errors import GatewayError
from plugins.common.config import plugin_entry, plugin_settings
from plugins.common.hosted_tools import EndpointsLimit, capable_endpoints
from plugins.web.search import SearchFailed, SearchOutcome, SearchRefused, configured_engines, engine_price, search
from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    HostedTool,
    Message,
    OutputHostedTool,
    OutputMessage,
    TextPart,
)
from routing.providers.base import as_mapping
from routing.providers.hosted import WEB_SEARCH, capability
from routing.side_calls import call_hold
from routing.stages import Block, RequestContext, Restaged, Staged, StageEntry

PLUGIN_ID = "web"
ONLINE_SUFFIX = "online"
DEFAULT_MAX_RESULTS = 5
RESULTS_ANNOTATION = "gateway_web_results"  # on the text part the results were added as (never sent upstream)
# Marks the annotation as this process's own: a caller cannot send one back to have its own links "cited".
_RESULTS_MARK = secrets.token_hex(16)
DEFAULT_SEARCH_PROMPT = (
    "A web search was conducted on {date}. Incorporate the following web search results into your response.\n\n"
    "IMPORTANT: Cite them using markdown links named using the domain of the source.\n"
    "Example: [nytimes.com](https://nytimes.com/some-page)."
)
NO_RESULTS = "The web search found no results."
NATIVE = "native"
NATIVE_SOURCE = "plugins: web"  # the source of the web_search tool the plugin adds (routing.canonical.HostedTool)
MSG_NATIVE = (
    "web search engine 'native' (the provider's own web search) is not available on this gateway for {models}: {why}"
)
ENGINE_ONLY = ("max_results", "search_prompt")  # options of the gateway's engines a provider's search has no say in
MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]{0,500})\]\((https?://[^\s()<>]{1,2048})(?:\s+\"[^\"\n]{0,300}\")?\)")


def web_options(ctx: RequestContext) -> dict[str, Any] | None:
    """The web plugin's options when it runs for this request (the `:online` suffix turns it on with the
    entry's options, or the defaults), else None."""
    options = plugin_settings(ctx, PLUGIN_ID)
    if options is None and ctx.suffix == ONLINE_SUFFIX:
        return plugin_entry(ctx, PLUGIN_ID) or {"id": PLUGIN_ID}
    return options


def _last_user(request: CanonicalRequest) -> int | None:
    return next(
        (
            index
            for index in range(len(request.input) - 1, -1, -1)
            if isinstance(request.input[index], Message) and request.input[index].role == "user"  # type: ignore[union-attr]
        ),
        None,
    )


def _query(message: Message) -> str:
    return " ".join(part.text for part in message.content if isinstance(part, TextPart)).strip()


def results_text(outcome: SearchOutcome, *, prompt: str | None, now: datetime | None = None) -> str:
    """The text the model reads: the prompt (dated), then each result with its URL, date and snippet."""
    date = (now or datetime.now(UTC)).strftime("%B %-d, %Y")
    intro = (prompt or DEFAULT_SEARCH_PROMPT).replace("{date}", date)
    if prompt and "{date}" not in prompt:
        intro = f"{intro}\n(Web search conducted on {date}.)"
    if not outcome.results:
        return f"{intro}\n\n{NO_RESULTS}"
    blocks = []
    for number, result in enumerate(outcome.results, start=1):
        lines = [f"[{number}] {result.title}", f"URL: {result.url}"]
        if result.published:
            lines.append(f"Published: {result.published}")
        if result.snippet:
            lines.append(result.snippet)
        blocks.append("\n".join(lines))
    return intro + "\n\n" + "\n\n".join(blocks)


class WebStage:
    type = "request_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        options = web_options(ctx)
        if options is None:
            return Staged(request=request)
        engine = options.get("engine") or None
        if engine in (None, NATIVE):
            native = native_search(request, ctx, options)
            if isinstance(native, Staged):
                return native
            if engine == NATIVE:
                return Block(
                    MSG_NATIVE.format(models=", ".join(ctx.models), why=native), metadata={"plugin": PLUGIN_ID}
                )
        return self._engine_search(request, options, ctx)

    def _engine_search(self, request: CanonicalRequest, options: dict[str, Any], ctx: RequestContext) -> Staged | Block:
        """A search through the gateway's engine, its results added to the last user message. The search is paid:
        held first at the dearest configured engine's price (routing.side_calls.call_hold: the credits, the key's
        limit, the guardrail budgets; refused: 402 / 403, nothing searched), the hold handed on with the result."""
        index = _last_user(request)
        query = _query(request.input[index]) if index is not None else ""  # type: ignore[arg-type]
        worst = max(map(engine_price, configured_engines()), default=Decimal(0))
        hold = call_hold(ctx, worst, label="web search") if worst > 0 else None
        if isinstance(hold, GatewayError):
            return Block(hold.message, status=hold.status, metadata={"plugin": PLUGIN_ID})
        holds = (hold,) if hold is not None else ()
        try:
            outcome = search(
                query,
                engine=options.get("engine") or None,  # None: the default engine (native was not possible)
                max_results=options.get("max_results") or DEFAULT_MAX_RESULTS,
                include_domains=options.get("include_domains") or (),
                exclude_domains=options.get("exclude_domains") or (),
            )
        except (SearchRefused, SearchFailed) as error:
            return Block(error.message, status=error.status, metadata={"plugin": PLUGIN_ID}, holds=holds)
        except BaseException:
            for held in holds:
                hold_drop(held)
            raise
        assert index is not None  # search() refuses an empty query
        message = request.input[index]
        assert isinstance(message, Message)
        results = [{"url": r.url, "title": r.title} for r in outcome.results]
        part = TextPart(
            text=results_text(outcome, prompt=options.get("search_prompt")),
            annotations=({"type": RESULTS_ANNOTATION, "mark": _RESULTS_MARK, "results": results},),
        )
        items = list(request.input)
        items[index] = replace(message, content=message.content + (part,))
        figures = {"num_search_results": len(outcome.results), "web_search_engine": outcome.engine}
        entry = StageEntry(
            type=self.type,
            name=PLUGIN_ID,
            outcome="searched",
            data={"engine": outcome.engine, "results": len(outcome.results)},
            cost_usd=outcome.cost_usd or None,
        )
        return Staged(
            request=replace(request, input=tuple(items)),
            entries=(entry,),
            cost_usd=outcome.cost_usd,
            record={"plugins": {PLUGIN_ID: figures}},
            holds=holds,  # the request's own hold takes it over
        )


def native_tool(options: dict[str, Any]) -> dict[str, Any] | str:
    """The provider's web search tool (Responses shape) for the plugin's options, or why there is none: domain
    filters become `filters.allowed_domains` / `filters.blocked_domains` (the adapters refuse what their provider
    cannot do); max_results and search_prompt belong to the gateway's engines."""
    if given := [name for name in ENGINE_ONLY if options.get(name) is not None]:
        return f"{' and '.join(given)} apply to the gateway's search engines, not to a provider's own search"
    tool: dict[str, Any] = {"type": WEB_SEARCH}
    filters = {
        name: [re.sub(r"^[a-z][a-z0-9+.-]*://(www\.)?", "", d.strip().lower()).rstrip("/") for d in options[key]]
        for key, name in (("include_domains", "allowed_domains"), ("exclude_domains", "blocked_domains"))
        if options.get(key)
    }
    if filters:
        tool["filters"] = filters
    return tool


def native_search(request: CanonicalRequest, ctx: RequestContext, options: dict[str, Any]) -> Staged | str:
    """The plugin as the provider's own web search: its tool added to the request, routing limited to the endpoints
    that run it as given; or why that is not possible (the plugin then searches with the default engine, or a
    `native` engine asked for is a 400)."""
    tool = native_tool(options)
    if isinstance(tool, str):
        return tool
    if any(capability(str(t.spec.get("type"))) == WEB_SEARCH for t in request.hosted_tools):
        return "the request has a web_search tool of its own"
    searching = HostedTool(spec=tool, source=NATIVE_SOURCE)
    capable = capable_endpoints(ctx.models, (*request.hosted_tools, searching))
    if not capable.endpoint_ids:
        return "no endpoint of it runs web search natively" if capable.why == "no endpoint runs it" else capable.why
    limit = EndpointsLimit(source="the web plugin (native search)", status=400, endpoint_ids=capable.endpoint_ids)
    entry = StageEntry(
        type=WebStage.type,
        name=PLUGIN_ID,
        outcome="native search",
        data={"engine": NATIVE, "endpoints": len(capable.endpoint_ids)},
    )
    return Staged(
        request=replace(request, hosted_tools=(*request.hosted_tools, searching)),
        entries=(entry,),
        limits=(limit,),
        record={"plugins": {PLUGIN_ID: {"num_search_results": 0, "web_search_engine": NATIVE}}},
    )


def native_searched(request: CanonicalRequest) -> bool:
    """Whether the plugin's search is the provider's own (WebStage added its web_search tool)."""
    return any(tool.source == NATIVE_SOURCE for tool in request.hosted_tools)


def native_sources(response: CanonicalResponse) -> list[str]:
    """The pages the provider's searches found (its web_search_call items' sources, else its citations' URLs)."""
    found: list[str] = []
    for item in response.output:
        if isinstance(item, OutputHostedTool) and item.item.get("type") == "web_search_call":
            sources = as_mapping(item.item.get("action")).get("sources")
            found += [s["url"] for s in sources or () if isinstance(s, dict) and isinstance(s.get("url"), str)]
    if not found:
        found = [
            a["url"]
            for i in response.output
            if isinstance(i, OutputMessage)
            for a in i.annotations
            if a.get("type") == "url_citation"
        ]
    return list(dict.fromkeys(found))


def search_results(request: CanonicalRequest) -> list[dict[str, Any]]:
    """The results WebStage added to the request (url, title), in order."""
    found: list[dict[str, Any]] = []
    for item in request.input:
        if isinstance(item, Message) and item.role == "user":
            for part in item.content:
                if isinstance(part, TextPart):
                    for annotation in part.annotations:
                        if annotation.get("type") == RESULTS_ANNOTATION and annotation.get("mark") == _RESULTS_MARK:
                            found.extend(annotation.get("results") or ())
    return found


def _normal(url: str) -> tuple[str, str]:
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return "", ""
    host = host[4:] if host.startswith("www.") else host
    return host, f"{host}{parts.path.rstrip('/')}{'?' + parts.query if parts.query else ''}"


def citations(text: str, results: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """url_citation annotations for the markdown links in `text` that point at a result's page or site."""
    pages: dict[str, dict[str, Any]] = {}
    sites = set()
    for result in results:
        host, page = _normal(result["url"])
        pages.setdefault(page, result)
        sites.add(host)
    found = []
    for match in MARKDOWN_LINK.finditer(text):
        label, url = match.group(1), match.group(2)
        host, page = _normal(url)
        if page in pages:
            title = pages[page]["title"]
        elif host in sites:
            title = label.strip() or url
        else:
            continue
        found.append(
            {"type": "url_citation", "url": url, "title": title, "start_index": match.start(), "end_index": match.end()}
        )
    return tuple(found)


class WebCitationStage:
    """The `web` plugin's citations on the answer (url_citation annotations)."""

    type = "response_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def wants(self, ctx: RequestContext) -> bool:
        if ctx.request is None or web_options(ctx) is None:
            return False
        return bool(search_results(ctx.request)) or native_searched(ctx.request)

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Restaged:
        assert ctx.request is not None
        results = search_results(ctx.request)
        if not results and native_searched(ctx.request):
            return self._native(response)
        output = list(response.output)
        count = 0
        for index, item in enumerate(output):
            if isinstance(item, OutputMessage) and item.text:
                found = citations(item.text, results)
                if found:
                    output[index] = replace(item, annotations=item.annotations + found)
                    count += len(found)
        if not count:
            return response
        entry = StageEntry(type=self.type, name=PLUGIN_ID, outcome="cited", data={"citations": count})
        return Restaged(response=replace(response, output=tuple(output)), entries=(entry,))

    def _native(self, response: CanonicalResponse) -> Restaged:
        """The provider's own search: its citations are already on the answer; the generation record gets the
        pages it found and the engine (its searches are billed in the usage: usage.web_search_requests)."""
        sources = native_sources(response)
        cited = sum(
            1
            for i in response.output
            if isinstance(i, OutputMessage)
            for a in i.annotations
            if a.get("type") == "url_citation"
        )
        searches = response.usage.web_search_requests
        entry = StageEntry(
            type=self.type,
            name=PLUGIN_ID,
            outcome="cited" if cited else "passed",
            data={"engine": NATIVE, "searches": searches, "results": len(sources), "citations": cited},
        )
        figures = {"num_search_results": len(sources), "web_search_engine": NATIVE}
        return Restaged(response=response, entries=(entry,), record={"plugins": {PLUGIN_ID: figures}})
