"""The stand-in's web search engine and web pages, so that web search and web fetch are testable offline.

- `GET /search?q=<query>&format=json`: a SearXNG-shaped answer (https://docs.searxng.org/dev/search_api.html):
  `{query, number_of_results, results: [{url, title, content, engine, publishedDate, score}], answers: [],
  suggestions: [], unresponsive_engines: []}`. The results are a fixed set of pages on several domains (so that
  domain filters have something to filter), each snippet quoting the query. `format` other than json is 403
  (as SearXNG answers a format the instance did not enable). A `STANDIN-NO-RESULTS` query has no results; the
  endpoint's `/s/status=503/` path prefix answers that status.
- `GET /pages/<name>`: pages to fetch: `article.html` (an article inside navigation, script and footer
  boilerplate), `notes.txt`, `readme.md`, `data.json`, `doc.pdf` (a one-page PDF with a text layer),
  `image.png` (a content type no reader takes), `big.txt?bytes=N`, `missing` (404), `redirect?to=<url>&code=302`
  (a redirect to any URL, loopback or metadata addresses included), `loop` (redirects to itself).

Every request is recorded like the model requests (`server.received`, path `/search` or `/pages/...`)."""

import json
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from routing.standin.script import parse_path

if TYPE_CHECKING:
    from routing.standin.server import StandinHandler

NO_RESULTS = "STANDIN-NO-RESULTS"
RESULTS = (
    ("https://docs.example.com/guide/intro", "Example Docs: Introduction", "2026-01-15T00:00:00"),
    ("https://example.com/blog/2026/launch", "Example blog: the launch", "2026-02-01T09:30:00"),
    ("https://news.example.org/story/42", "Example News: story 42", None),
    ("https://en.wikipedia.org/wiki/Example", "Example - Wikipedia", "2025-12-24T00:00:00"),
    ("https://foo.substack.com/p/example-post", "Foo's newsletter: an example post", "2026-03-03T00:00:00"),
    ("https://example.com/about", "About Example", None),
    ("https://other.example.net/page", "Another page", None),
)
ARTICLE = """<!doctype html>
<html><head><title>Stand-in article</title><script>var tracking = "do not read me";</script>
<style>body { color: red }</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/login">Login</a></nav>
<article><h1>The stand-in article</h1>
<p>The stand-in provider serves this article so that web fetch can be tested without the internet. It has a
few paragraphs of real prose, so that the extractor keeps them as the page's main text.</p>
<p>The second paragraph says that the gateway reads pages through its one outbound HTTP module, which refuses
private, loopback and link-local destinations unless the operator allows them.</p>
<p>The third paragraph holds the marker STANDIN-ARTICLE-TEXT so that tests can find it.</p>
</article>
<footer>Copyright footer, cookie banner, newsletter sign-up</footer></body></html>
"""
PAGES = {
    "notes.txt": ("text/plain; charset=utf-8", b"Plain notes from the stand-in: STANDIN-NOTES-TEXT.\n"),
    "readme.md": ("text/markdown", b"# Read me\n\nA *Markdown* page: STANDIN-README-TEXT.\n"),
    "data.json": ("application/json", b'{"marker": "STANDIN-JSON-TEXT", "items": [1, 2, 3]}'),
    "image.png": ("image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
}


def _pdf(text: str) -> bytes:
    """A one-page PDF whose text layer holds `text` (built by hand: the xref offsets are computed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PDF = _pdf("The stand-in PDF says STANDIN-PDF-TEXT on its only page.")


def handles(path: str) -> bool:
    _, plain = parse_path(path)
    return plain.startswith(("/search", "/pages/"))


def answer(handler: "StandinHandler") -> None:
    """Answer a GET for /search or /pages/... on the stand-in's handler."""
    overrides, path = parse_path(handler.path)
    parts = urlsplit(path)
    query = {name: values[0] for name, values in parse_qs(parts.query).items()}
    with handler.server.lock:
        handler.server.received.append(
            {
                "path": parts.path,
                "query": query,
                "credential": "",
                "body": {},
                "headers": {k.lower(): v for k, v in handler.headers.items()},
            }
        )
    status = int(overrides.get("status") or 200)
    if status != 200:
        handler._send_bytes(status, b'{"error": "scripted failure"}', "application/json")
        return
    if parts.path == "/search":
        _search(handler, query)
    else:
        _page(handler, parts.path.removeprefix("/pages/"), query)


def _search(handler: "StandinHandler", query: dict[str, str]) -> None:
    if query.get("format") != "json":
        handler._send_bytes(403, b"Forbidden", "text/html")
        return
    text = query.get("q", "")
    results = [] if NO_RESULTS in text else [
        {
            "url": url,
            "title": title,
            "content": f"{title}: a page about {text[:100]}.",
            "engine": "standin",
            "engines": ["standin"],
            "publishedDate": published,
            "score": round(1.0 - index / 10, 2),
            "category": "general",
        }
        for index, (url, title, published) in enumerate(RESULTS)
    ]  # fmt: skip
    payload = {
        "query": text,
        "number_of_results": len(results),
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }
    handler._send_bytes(200, json.dumps(payload).encode(), "application/json")


def _page(handler: "StandinHandler", name: str, query: dict[str, str]) -> None:
    if name == "article.html":
        handler._send_bytes(200, ARTICLE.encode(), "text/html; charset=utf-8")
    elif name == "doc.pdf":
        handler._send_bytes(200, PDF, "application/pdf")
    elif name in PAGES:
        content_type, body = PAGES[name]
        handler._send_bytes(200, body, content_type)
    elif name == "big.txt":
        size = min(int(query.get("bytes") or 1024), 64 * 1024 * 1024)
        handler._send_bytes(200, b"x" * size, "text/plain")
    elif name == "redirect":
        code = int(query.get("code") or 302)
        handler._send_bytes(code, b"", "text/plain", {"Location": query.get("to", "/")})
    elif name == "loop":
        handler._send_bytes(302, b"", "text/plain", {"Location": "/pages/loop"})
    else:
        handler._send_bytes(404, b"not found", "text/plain")
