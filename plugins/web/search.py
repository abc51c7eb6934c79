"""Search engines: one request to the engine's public REST API through routing.http, its answer read into
SearchResults. Each engine is a request builder and a response reader (pure, golden-tested) plus its settings.

- exa: `POST https://api.exa.ai/search`, header `x-api-key`, body `{query, numResults, includeDomains?,
  excludeDomains?, contents: {highlights: {maxCharacters}}}`; results `{url, title, publishedDate, highlights,
  text}` (https://docs.exa.ai/reference/search).
- tavily: `POST https://api.tavily.com/search`, header `Authorization: Bearer <key>`, body `{query, max_results,
  include_domains?, exclude_domains?, search_depth: "basic"}`; results `{url, title, content, score,
  published_date?}` (https://docs.tavily.com/documentation/api-reference/endpoint/search).
- brave: `GET https://api.search.brave.com/res/v1/web/search?q=&count=`, headers `X-Subscription-Token`,
  `Accept: application/json`; results under `web.results` `{url, title, description, page_age?}`; no domain
  parameters: included domains become `site:` operators in the query (https://api-dashboard.search.brave.com/
  app/documentation/web-search/get-started).
- searxng: `GET <instance>/search?q=&format=json` (the instance must enable the json format); results `{url,
  title, content, publishedDate?}`; no count parameter (a page of ~20 is cut here), `site:` as for Brave
  (https://docs.searxng.org/dev/search_api.html).

Every engine's results are filtered here too by the caller's include/exclude patterns (wildcards and paths the
engines cannot express), and cut to max_results."""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings

from gateway.errors import GatewayError
from plugins.common.domains import Pattern, parse_patterns, url_passes
from routing import http
from routing.snapshot import search_engine_prices

EXA, TAVILY, BRAVE, SEARXNG, NATIVE = "exa", "tavily", "brave", "searxng", "native"
ENGINES = (EXA, TAVILY, BRAVE, SEARXNG)
MAX_RESULTS = 20  # per search (Brave and Tavily allow 20; more would not fit a context anyway)
MAX_QUERY_CHARS = 400  # Brave refuses longer queries; a search query is not a document
SNIPPET_CHARS = 1500  # per result, in the context
SEARCH_TIMEOUTS = http.Timeouts(connect=5.0, read=20.0, total=30.0)
MAX_ANSWER_BYTES = 4 * 1024 * 1024
DEFAULT_PRICES = {EXA: "0.007", TAVILY: "0.008", BRAVE: "0.005", SEARXNG: "0"}  # USD per search
DEFAULT_URLS = {
    EXA: "https://api.exa.ai/search",
    TAVILY: "https://api.tavily.com/search",
    BRAVE: "https://api.search.brave.com/res/v1/web/search",
}

MSG_NATIVE = "web search engine 'native' (the provider's own web search) is not available on this gateway"
MSG_UNKNOWN = "web search engine '{engine}' is unknown: use one of {engines}"
MSG_NOT_CONFIGURED = "web search engine '{engine}' is not configured on this gateway (configured: {configured})"
MSG_NONE_CONFIGURED = "web search is not available: no search engine is configured on this gateway"
MSG_EMPTY_QUERY = "web search needs a query: the request has no user text to search with"
MSG_FAILED = "web search engine '{engine}' failed: {why}"


class SearchRefused(GatewayError):
    status = 400


class SearchFailed(GatewayError):
    status = 502


@dataclass(frozen=True, slots=True)
class SearchResult:
    url: str
    title: str
    snippet: str
    published: str | None = None  # ISO date (YYYY-MM-DD) when the engine knows it


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    engine: str
    query: str
    results: tuple[SearchResult, ...]
    cost_usd: Decimal


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One call to an engine's API (golden-tested: what the engine's documentation asks for)."""

    method: str
    url: str
    headers: dict[str, str]
    json_body: dict[str, Any] | None = None
    allow_private: bool = False

    def redacted(self) -> dict[str, Any]:
        secret = {"x-api-key", "authorization", "x-subscription-token"}
        headers = {name: ("<key>" if name.lower() in secret else value) for name, value in self.headers.items()}
        return {"method": self.method, "url": self.url, "headers": headers, "json": self.json_body}


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    count: int
    include: tuple[Pattern, ...] = ()
    exclude: tuple[Pattern, ...] = ()
    domains_in: tuple[str, ...] = field(default=())  # hosts the engine can filter on itself
    domains_out: tuple[str, ...] = field(default=())


# ---- configuration ------------------------------------------------------------------------------------------


def _key(engine: str) -> str:
    return str(getattr(settings, f"WEB_SEARCH_{engine.upper()}_API_KEY", "") or "")


def _searxng_url() -> str:
    return str(getattr(settings, "WEB_SEARCH_SEARXNG_URL", "") or "").rstrip("/")


def configured_engines() -> tuple[str, ...]:
    """The engines the operator set up (a key, or SearXNG's instance URL), in ENGINES order."""
    return tuple(engine for engine in ENGINES if (_searxng_url() if engine == SEARXNG else _key(engine)))


def default_engine() -> str | None:
    """WEB_SEARCH_DEFAULT_ENGINE when it is configured, else the only configured engine, else None."""
    configured = configured_engines()
    chosen = str(getattr(settings, "WEB_SEARCH_DEFAULT_ENGINE", "") or "")
    if chosen:
        return chosen if chosen in configured else None
    return configured[0] if len(configured) == 1 else None


def engine_price(engine: str) -> Decimal:
    """USD per search: the catalog's (`search_engines`, edited in the admin), else WEB_SEARCH_PRICES (a dict, or
    `exa=0.007,brave=0.005`), else the engine's list price."""
    catalog = search_engine_prices().get(engine)
    if catalog is not None:
        return catalog
    prices = getattr(settings, "WEB_SEARCH_PRICES", None) or {}
    if isinstance(prices, str):
        prices = dict(item.split("=", 1) for item in prices.split(",") if "=" in item)
    raw = {str(name).strip(): value for name, value in prices.items()}.get(engine, DEFAULT_PRICES.get(engine, "0"))
    try:
        price = Decimal(str(raw).strip())
    except InvalidOperation:
        raise SearchFailed(f"WEB_SEARCH_PRICES has an invalid price for '{engine}'", status=500) from None
    return price if price >= 0 else Decimal(0)


def resolve_engine(engine: str | None) -> str:
    """The engine a search uses, or SearchRefused saying why there is none."""
    configured = configured_engines()
    if engine == NATIVE:
        raise SearchRefused(MSG_NATIVE)
    if engine:
        if engine not in ENGINES:
            raise SearchRefused(MSG_UNKNOWN.format(engine=engine, engines=", ".join(ENGINES)))
        if engine not in configured:
            raise SearchRefused(MSG_NOT_CONFIGURED.format(engine=engine, configured=", ".join(configured) or "none"))
        return engine
    chosen = default_engine()
    if chosen is None:
        if not configured:
            raise SearchRefused(MSG_NONE_CONFIGURED)
        raise SearchRefused(
            "web search has no default engine on this gateway: name one with `engine` "
            f"(configured: {', '.join(configured)})"
        )
    return chosen


# ---- request builders (pure) --------------------------------------------------------------------------------


def _site_query(query: Query) -> str:
    """Brave and SearXNG take no domain parameters: their query syntax does (`site:`, `-site:`)."""
    parts = [query.text]
    if query.domains_in:
        sites = [f"site:{host}" for host in query.domains_in]
        parts.append(sites[0] if len(sites) == 1 else "(" + " OR ".join(sites) + ")")
    parts.extend(f"-site:{host}" for host in query.domains_out)
    return " ".join(parts)


def exa_request(query: Query, *, key: str, url: str) -> EngineRequest:
    body: dict[str, Any] = {
        "query": query.text,
        "numResults": query.count,
        "contents": {"highlights": {"maxCharacters": SNIPPET_CHARS}},
    }
    if query.domains_in:
        body["includeDomains"] = list(query.domains_in)
    if query.domains_out:
        body["excludeDomains"] = list(query.domains_out)
    return EngineRequest("POST", url, {"x-api-key": key, "Accept": "application/json"}, body)


def tavily_request(query: Query, *, key: str, url: str) -> EngineRequest:
    body: dict[str, Any] = {"query": query.text, "max_results": query.count, "search_depth": "basic"}
    if query.domains_in:
        body["include_domains"] = list(query.domains_in)
    if query.domains_out:
        body["exclude_domains"] = list(query.domains_out)
    return EngineRequest("POST", url, {"Authorization": f"Bearer {key}", "Accept": "application/json"}, body)


def brave_request(query: Query, *, key: str, url: str) -> EngineRequest:
    params = urlencode({"q": _site_query(query)[:MAX_QUERY_CHARS], "count": query.count})
    headers = {"X-Subscription-Token": key, "Accept": "application/json"}
    return EngineRequest("GET", f"{url}?{params}", headers)


def searxng_request(query: Query, *, base_url: str, allow_private: bool) -> EngineRequest:
    params = urlencode({"q": _site_query(query), "format": "json"})
    return EngineRequest(
        "GET", f"{base_url}/search?{params}", {"Accept": "application/json"}, allow_private=allow_private
    )


# ---- response readers (pure) --------------------------------------------------------------------------------


def _text(value: object, limit: int = SNIPPET_CHARS) -> str:
    if isinstance(value, list):
        value = " … ".join(str(item) for item in value if isinstance(item, str))
    if not isinstance(value, str):
        return ""
    return re.sub(r"\s+", " ", value).strip()[:limit]


_ISO_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")


def _date(value: object) -> str | None:
    """An ISO date (YYYY-MM-DD) from the engine's date: ISO 8601, or RFC 2822 (Tavily's news dates)."""
    if not isinstance(value, str):
        return None
    match = _ISO_DATE.match(value.strip())
    if match:
        return match.group(1)
    try:
        return parsedate_to_datetime(value).date().isoformat()
    except (TypeError, ValueError, IndexError):
        return None


def _results(items: object, read: Callable[[dict[str, Any]], SearchResult | None]) -> list[SearchResult]:
    if not isinstance(items, list):
        raise ValueError("no results list")
    out = []
    for item in items:
        if isinstance(item, dict):
            result = read(item)
            if result is not None and urlsplit(result.url).scheme in ("http", "https"):
                out.append(result)
    return out


def exa_results(body: dict[str, Any]) -> list[SearchResult]:
    def read(item: dict[str, Any]) -> SearchResult | None:
        url = item.get("url")
        if not isinstance(url, str):
            return None
        snippet = _text(item.get("highlights")) or _text(item.get("summary")) or _text(item.get("text"))
        return SearchResult(url, _text(item.get("title"), 300) or url, snippet, _date(item.get("publishedDate")))

    return _results(body.get("results"), read)


def tavily_results(body: dict[str, Any]) -> list[SearchResult]:
    def read(item: dict[str, Any]) -> SearchResult | None:
        url = item.get("url")
        if not isinstance(url, str):
            return None
        date = _date(item.get("published_date"))
        return SearchResult(url, _text(item.get("title"), 300) or url, _text(item.get("content")), date)

    return _results(body.get("results"), read)


def brave_results(body: dict[str, Any]) -> list[SearchResult]:
    def read(item: dict[str, Any]) -> SearchResult | None:
        url = item.get("url")
        if not isinstance(url, str):
            return None
        snippet = _text(re.sub(r"</?strong>", "", str(item.get("description") or "")))
        return SearchResult(url, _text(item.get("title"), 300) or url, snippet, _date(item.get("page_age")))

    web = body.get("web")
    return _results(web.get("results") if isinstance(web, dict) else [], read)


def searxng_results(body: dict[str, Any]) -> list[SearchResult]:
    def read(item: dict[str, Any]) -> SearchResult | None:
        url = item.get("url")
        if not isinstance(url, str):
            return None
        date = _date(item.get("publishedDate"))
        return SearchResult(url, _text(item.get("title"), 300) or url, _text(item.get("content")), date)

    return _results(body.get("results"), read)


READERS: dict[str, Callable[[dict[str, Any]], list[SearchResult]]] = {
    EXA: exa_results,
    TAVILY: tavily_results,
    BRAVE: brave_results,
    SEARXNG: searxng_results,
}


def engine_request(engine: str, query: Query) -> EngineRequest:
    if engine == SEARXNG:
        allow = bool(getattr(settings, "WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK", False))
        return searxng_request(query, base_url=_searxng_url(), allow_private=allow)
    url = str(getattr(settings, f"WEB_SEARCH_{engine.upper()}_URL", "") or DEFAULT_URLS[engine])
    builder = {EXA: exa_request, TAVILY: tavily_request, BRAVE: brave_request}[engine]
    return builder(query, key=_key(engine), url=url)


# ---- the search ---------------------------------------------------------------------------------------------


def build_query(
    text: str, *, count: int, include_domains: Iterable[object] = (), exclude_domains: Iterable[object] = ()
) -> Query:
    """What an engine is asked: with domain filters, twice the results (room for what the local filters drop);
    the hosts of the include patterns and the whole-host exclude patterns for the engines that filter."""
    include = parse_patterns(include_domains, field="include_domains", error=SearchRefused)
    exclude = parse_patterns(exclude_domains, field="exclude_domains", error=SearchRefused)
    return Query(
        text=text,
        count=min(MAX_RESULTS, count * 2) if (include or exclude) else count,
        include=include,
        exclude=exclude,
        domains_in=tuple(dict.fromkeys(p.host for p in include)),
        domains_out=tuple(dict.fromkeys(p.host for p in exclude if p.whole_host)),
    )


def search(
    query: str,
    *,
    engine: str | None = None,
    max_results: int = 5,
    include_domains: list[str] | tuple[str, ...] = (),
    exclude_domains: list[str] | tuple[str, ...] = (),
) -> SearchOutcome:
    """One search (see the module's docstring). SearchRefused (400) when it cannot be made as asked,
    SearchFailed (502) when the engine did not answer usably. The price is owed once the engine answered."""
    chosen = resolve_engine(engine)
    text = " ".join(query.split())[:MAX_QUERY_CHARS]
    if not text:
        raise SearchRefused(MSG_EMPTY_QUERY)
    count = max(1, min(int(max_results), MAX_RESULTS))
    asked = build_query(text, count=count, include_domains=include_domains, exclude_domains=exclude_domains)
    include, exclude = asked.include, asked.exclude
    call = engine_request(chosen, asked)
    body = _call(chosen, call)
    try:
        results = READERS[chosen](body)
    except (ValueError, AttributeError, TypeError):
        raise SearchFailed(MSG_FAILED.format(engine=chosen, why="its answer has no results list")) from None
    kept: list[SearchResult] = []
    seen: set[str] = set()
    for result in results:
        if result.url in seen or not url_passes(result.url, include=include, exclude=exclude):
            continue
        seen.add(result.url)
        kept.append(result)
        if len(kept) == count:
            break
    return SearchOutcome(engine=chosen, query=text, results=tuple(kept), cost_usd=engine_price(chosen))


def _call(engine: str, call: EngineRequest) -> dict[str, Any]:
    try:
        response = http.request(
            call.method,
            call.url,
            headers=call.headers,
            json_body=call.json_body,
            timeouts=SEARCH_TIMEOUTS,
            allow_private=call.allow_private,
            max_body=MAX_ANSWER_BYTES,
        )
    except http.ConnectionRefused:
        why = "its address is not a public address (WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK allows it)"
        raise SearchFailed(MSG_FAILED.format(engine=engine, why=why)) from None
    except http.TransportError as error:
        raise SearchFailed(MSG_FAILED.format(engine=engine, why=f"no usable answer ({error.kind})")) from None
    if response.status_code != 200:
        raise SearchFailed(MSG_FAILED.format(engine=engine, why=f"it answered HTTP {response.status_code}"))
    try:
        body = response.json()
    except ValueError:
        raise SearchFailed(MSG_FAILED.format(engine=engine, why="its answer is not JSON")) from None
    if not isinstance(body, dict):
        raise SearchFailed(MSG_FAILED.format(engine=engine, why="its answer is not a JSON object"))
    return body
