"""The web search engines: each engine's request against its documented API and its documented answer read into
results (golden fixtures in tests/fixtures/web/), the same over the wire to a loopback server, a live search
through the stand-in's SearXNG-shaped engine, the operator's configuration (default engine, engine not
configured, native, prices) and failures."""

import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from plugins.common.domains import url_matches
from plugins.web.search import (
    READERS,
    SearchFailed,
    SearchRefused,
    build_query,
    configured_engines,
    default_engine,
    engine_price,
    engine_request,
    search,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "web"
KEYS = {"exa": "exa-test-key", "tavily": "tvly-test-key", "brave": "BSA-test-key"}


def fixture(engine: str) -> dict:
    return json.loads((FIXTURES / f"{engine}.json").read_text())


def no_engines(settings) -> None:
    for engine in ("EXA", "TAVILY", "BRAVE"):
        setattr(settings, f"WEB_SEARCH_{engine}_API_KEY", "")
    settings.WEB_SEARCH_SEARXNG_URL = ""
    settings.WEB_SEARCH_DEFAULT_ENGINE = ""


def configure_documented(settings, engine: str, base: str | None = None) -> None:
    """The engine configured with its documented public URL (or `base`, a loopback server, in its place)."""
    no_engines(settings)
    if engine == "searxng":
        settings.WEB_SEARCH_SEARXNG_URL = base or "http://searxng.internal:8080"
        settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
        return
    setattr(settings, f"WEB_SEARCH_{engine.upper()}_API_KEY", KEYS[engine])
    documented = urlsplit(fixture(engine)["request"]["url"])
    url = f"{documented.scheme}://{documented.netloc}{documented.path}"
    if base:
        url = base + documented.path
    setattr(settings, f"WEB_SEARCH_{engine.upper()}_URL", url)


def expected_results(golden: dict) -> list[dict]:
    return golden["results"]


def as_dicts(results) -> list[dict]:
    return [{"url": r.url, "title": r.title, "snippet": r.snippet, "published": r.published} for r in results]


@pytest.mark.parametrize("engine", ["exa", "tavily", "brave", "searxng"])
def test_each_engine_sends_its_documented_request(settings, engine):
    golden = fixture(engine)
    configure_documented(settings, engine)
    asked = golden["query"]
    query = build_query(
        asked["text"], count=asked["count"], include_domains=asked["include"], exclude_domains=asked["exclude"]
    )
    call = engine_request(engine, query)
    assert call.redacted() == golden["request"]
    if engine != "searxng":  # the key goes in the engine's own header
        sent = " ".join(call.headers.values())
        assert KEYS[engine] in sent


@pytest.mark.parametrize("engine", ["exa", "tavily", "brave", "searxng"])
def test_each_engine_answer_is_read_into_results(engine):
    golden = fixture(engine)
    read = READERS[engine](golden["response"])
    assert all(r.url.startswith(("http://", "https://")) for r in read)  # others (ftp:) are dropped
    asked = golden["query"]
    query = build_query(
        asked["text"], count=asked["count"], include_domains=asked["include"], exclude_domains=asked["exclude"]
    )
    kept = [r for r in read if (not query.include or url_matches(r.url, query.include))]
    kept = [r for r in kept if not (query.exclude and url_matches(r.url, query.exclude))][: asked["count"]]
    assert as_dicts(kept) == expected_results(golden)


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        return

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(  # type: ignore[attr-defined]
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "json": json.loads(body) if body else None,
            }
        )
        payload = json.dumps(self.server.answer).encode()  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer


@pytest.fixture
def engine_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen, server.answer, server.status = [], {}, 200  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("engine", ["exa", "tavily", "brave"])
def test_each_engine_over_the_wire_sends_the_documented_request_and_reads_the_answer(
    db, settings, engine, engine_server
):
    golden = fixture(engine)
    host, port = engine_server.server_address[:2]
    configure_documented(settings, engine, base=f"http://{host}:{port}")
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True  # the engine's stand-in is on loopback
    engine_server.answer = golden["response"]
    asked = golden["query"]

    outcome = search(
        asked["text"],
        engine=engine,
        max_results=asked["count"],
        include_domains=asked["include"],
        exclude_domains=asked["exclude"],
    )

    (seen,) = engine_server.seen
    documented = urlsplit(golden["request"]["url"])
    assert seen["method"] == golden["request"]["method"]
    assert seen["path"] == documented.path + (f"?{documented.query}" if documented.query else "")
    assert seen["json"] == golden["request"]["json"]
    for name, value in golden["request"]["headers"].items():
        expected = {"<key>": KEYS[engine]}.get(value, value)
        if name == "Authorization":
            expected = f"Bearer {KEYS[engine]}"
        assert seen["headers"][name.lower()] == expected
    assert as_dicts(outcome.results) == expected_results(golden)
    assert outcome.engine == engine and outcome.cost_usd == engine_price(engine) > 0


def test_a_live_search_through_the_standin_searxng(db, settings, standin):
    no_engines(settings)
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True  # the operator's own instance on a private address
    standin.clear()

    outcome = search("quantum sensors", max_results=3, include_domains=["example.com"])

    assert outcome.engine == "searxng" and outcome.cost_usd == Decimal("0")
    assert [r.url for r in outcome.results] == [
        "https://docs.example.com/guide/intro",
        "https://example.com/blog/2026/launch",
        "https://example.com/about",
    ]
    assert outcome.results[0].published == "2026-01-15" and "quantum sensors" in outcome.results[0].snippet
    (call,) = standin.requests_for("/search")
    assert call["query"] == {"q": "quantum sensors site:example.com", "format": "json"}


def test_searxng_on_a_private_address_needs_the_operators_switch(settings, standin):
    no_engines(settings)
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = False
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    standin.clear()
    with pytest.raises(SearchFailed) as failed:
        search("anything")
    assert failed.value.status == 502 and "WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK" in failed.value.message
    assert standin.requests_for("/search") == []


def test_an_engine_that_fails_is_a_502_naming_it(settings, standin):
    no_engines(settings)
    settings.WEB_SEARCH_SEARXNG_URL = f"{standin.url}/s/status=503"
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    with pytest.raises(SearchFailed) as failed:
        search("anything")
    assert failed.value.status == 502
    assert failed.value.message == "web search engine 'searxng' failed: it answered HTTP 503"


def test_an_engine_answer_without_results_is_a_502(settings, engine_server):
    host, port = engine_server.server_address[:2]
    configure_documented(settings, "exa", base=f"http://{host}:{port}")
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    engine_server.answer = {"error": "nope"}
    with pytest.raises(SearchFailed, match="no results list"):
        search("anything", engine="exa")


def test_engine_choice_follows_the_operators_configuration(settings):
    no_engines(settings)
    assert configured_engines() == () and default_engine() is None
    with pytest.raises(SearchRefused) as refused:
        search("anything")
    assert refused.value.status == 400
    assert refused.value.message == "web search is not available: no search engine is configured on this gateway"

    settings.WEB_SEARCH_BRAVE_API_KEY = "k"
    assert configured_engines() == ("brave",) and default_engine() == "brave"  # the only one

    settings.WEB_SEARCH_EXA_API_KEY = "k"
    assert default_engine() is None  # two, no default: the caller must name one
    with pytest.raises(SearchRefused, match="no default engine on this gateway"):
        search("anything")
    settings.WEB_SEARCH_DEFAULT_ENGINE = "exa"
    assert default_engine() == "exa"

    with pytest.raises(SearchRefused) as refused:
        search("anything", engine="tavily")
    assert refused.value.message == (
        "web search engine 'tavily' is not configured on this gateway (configured: exa, brave)"
    )
    with pytest.raises(SearchRefused, match="'native' .* is not available on this gateway"):
        search("anything", engine="native")
    with pytest.raises(SearchRefused, match="'bing' is unknown"):
        search("anything", engine="bing")


def test_prices_per_search_come_from_the_operator_when_the_catalog_has_none(db, settings):
    settings.WEB_SEARCH_PRICES = {"exa": "0.01"}
    assert engine_price("exa") == Decimal("0.01")
    assert engine_price("brave") == Decimal("0.005")  # the list price when not set
    settings.WEB_SEARCH_PRICES = "exa=0.002, searxng=0.0001"
    assert engine_price("exa") == Decimal("0.002") and engine_price("searxng") == Decimal("0.0001")


def test_a_search_needs_a_query_and_valid_domain_patterns(settings, standin):
    no_engines(settings)
    settings.WEB_SEARCH_SEARXNG_URL = standin.url
    settings.WEB_SEARCH_SEARXNG_ALLOW_PRIVATE_NETWORK = True
    with pytest.raises(SearchRefused, match="needs a query"):
        search("   ")
    with pytest.raises(SearchRefused, match="include_domains: 'not a domain' is not a domain pattern"):
        search("x", include_domains=["not a domain"])


@pytest.mark.parametrize(
    ("url", "pattern", "matches"),
    [
        ("https://example.com/a", "example.com", True),
        ("https://docs.example.com/a", "example.com", True),
        ("https://example.com.evil.org/a", "example.com", False),
        ("https://notexample.com/", "example.com", False),
        ("https://foo.substack.com/p/x", "*.substack.com", True),
        ("https://substack.com/", "*.substack.com", False),
        ("https://openai.com/blog/post", "openai.com/blog", True),
        ("https://openai.com/blog", "openai.com/blog/", True),
        ("https://openai.com/blogger", "openai.com/blog", False),
        ("https://www.openai.com/blog/x", "https://www.OpenAI.com/blog", True),
        ("https://EXAMPLE.com/", "example.com", True),
    ],
)
def test_domain_patterns(url, pattern, matches):
    assert url_matches(url, [pattern]) is matches
