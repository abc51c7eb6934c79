"""Web search and web fetch engines: the `web` plugin and the `gateway:web_search` / `gateway:web_fetch` server
tools call these two functions.

- `search(query, engine=..., max_results=..., include_domains=..., exclude_domains=...)`: one search through an
  engine the operator configured (plugins.webkit.engines: Exa, Tavily, Brave Search, SearXNG), its results and
  its price. `engine=None`: the operator's default engine (WEB_SEARCH_DEFAULT_ENGINE).
- `fetch(url, max_content_tokens=..., allowed_domains=..., blocked_domains=...)`: one page read through
  routing.http with the SSRF rules (redirects followed here, each target checked again), as clean text (HTML by
  trafilatura, PDFs by the file-parser's PDF reader).

Errors are GatewayErrors (the spec's error body): SearchRefused (400: engine not configured, native, bad
filters), SearchFailed (502: the engine did not answer usably), FetchRefused (400: URL, domain or destination
not allowed, content type not readable, too large), FetchFailed (502: unreachable, HTTP error, timeout).
"""

from plugins.webkit.domains import domain_allowed, url_matches
from plugins.webkit.engines import (
    ENGINES,
    SearchFailed,
    SearchOutcome,
    SearchRefused,
    SearchResult,
    configured_engines,
    default_engine,
    engine_price,
    search,
)
from plugins.webkit.fetch import FetchedPage, FetchFailed, FetchRefused, fetch

__all__ = [
    "ENGINES",
    "FetchFailed",
    "FetchRefused",
    "FetchedPage",
    "SearchFailed",
    "SearchOutcome",
    "SearchRefused",
    "SearchResult",
    "configured_engines",
    "default_engine",
    "domain_allowed",
    "engine_price",
    "fetch",
    "search",
    "url_matches",
]
