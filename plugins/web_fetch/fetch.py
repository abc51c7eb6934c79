"""Reading one web page for a model: routing.http with its SSRF guard (private, loopback, link-local and other
non-public destinations refused at connect time, on the address actually connected to), redirects followed here
one at a time (each target checked again: scheme, credentials, literal address, allowed/blocked domains), a
size cap, a deadline for the whole fetch, and only content a model can read: HTML (reduced to its main text as
Markdown by trafilatura), plain text, Markdown, JSON, CSV, XML, and PDFs (their text layer, read by the
file-parser's sandboxed PDF reader)."""

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from django.conf import settings

from gateway.errors import GatewayError
from gateway.netaddr import is_public_address, literal_address
from plugins.common.documents.errors import FileRefused
from plugins.common.documents.loaded import LoadedFile
from plugins.common.documents.pdf import OutOfTime
from plugins.common.documents.sandbox import pdf_read
from plugins.common.domains import Pattern, parse_patterns, url_passes
from routing import http

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_TIMEOUT_SECONDS = 20.0
DEFAULT_MAX_REDIRECTS = 5
MAX_URL_CHARS = 4096
CHARS_PER_TOKEN = 4  # max_content_tokens -> characters (a rough tokenizer-free measure, on the safe side)
REDIRECTS = (301, 302, 303, 307, 308)
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown", "text/csv", "application/json", "text/xml")
PDF_TYPES = ("application/pdf",)
ACCEPT = "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.8,application/pdf;q=0.8"

MSG_SCHEME = "web fetch: only http and https URLs can be fetched"
MSG_BAD_URL = "web fetch: the URL is not valid"
MSG_CREDENTIALS = "web fetch: URLs with a user name or password are not fetched"
MSG_PRIVATE = "web fetch: {url} is refused: its destination is not a public address"
MSG_DOMAIN = "web fetch: {host} is not allowed by the request's allowed_domains / blocked_domains"
MSG_TOO_MANY_REDIRECTS = "web fetch: more than {limit} redirects"
MSG_TYPE = "web fetch: content type '{type}' cannot be read (HTML, text, Markdown, JSON, CSV, XML or PDF are read)"
MSG_TOO_LARGE = "web fetch: the page is larger than {mib} MiB"
MSG_HTTP = "web fetch: {url} answered HTTP {status}"
MSG_TRANSPORT = "web fetch: {url} could not be fetched ({why})"
MSG_NO_TEXT = "web fetch: {url} has no readable text"


class FetchRefused(GatewayError):
    status = 400


class FetchFailed(GatewayError):
    status = 502


@dataclass(frozen=True, slots=True)
class FetchedPage:
    url: str  # after redirects
    title: str
    text: str
    content_type: str
    truncated: bool
    status: int = 200


def _setting(name: str, default: float) -> str | float:
    value = getattr(settings, name, None)
    return default if value in (None, "") else value


def _checked_url(url: str, allowed: tuple[Pattern, ...], blocked: tuple[Pattern, ...]) -> str:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise FetchRefused(MSG_BAD_URL)
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        raise FetchRefused(MSG_BAD_URL) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise FetchRefused(MSG_SCHEME)
    if not host:
        raise FetchRefused(MSG_BAD_URL)
    if parts.username is not None or parts.password is not None:
        raise FetchRefused(MSG_CREDENTIALS)
    address = literal_address(host)
    private_ok = bool(getattr(settings, "OUTBOUND_ALLOW_PRIVATE_NETWORKS", False))
    if address is not None and not private_ok and not is_public_address(address):
        raise FetchRefused(MSG_PRIVATE.format(url=_short(url)))
    if not url_passes(url, include=allowed, exclude=blocked):
        raise FetchRefused(MSG_DOMAIN.format(host=host))
    return parts.geturl()


def _short(url: str) -> str:
    return url if len(url) <= 200 else url[:200] + "…"


def fetch(
    url: str,
    *,
    max_content_tokens: int | None = None,
    allowed_domains: Iterable[object] | None = None,
    blocked_domains: Iterable[object] | None = None,
) -> FetchedPage:
    """The page's readable text (see the module's docstring). FetchRefused (400): not fetched because of the
    URL, its destination, the domain lists, its type or size; FetchFailed (502): the site did not answer usably."""
    allowed = parse_patterns(allowed_domains, field="allowed_domains", error=FetchRefused)
    blocked = parse_patterns(blocked_domains, field="blocked_domains", error=FetchRefused)
    max_bytes = int(_setting("WEB_FETCH_MAX_BYTES", DEFAULT_MAX_BYTES))
    seconds = float(_setting("WEB_FETCH_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS))
    max_redirects = int(_setting("WEB_FETCH_MAX_REDIRECTS", DEFAULT_MAX_REDIRECTS))
    deadline = time.monotonic() + seconds
    current = _checked_url(url, allowed, blocked)
    for _hop in range(max_redirects + 1):
        response = _get(current, deadline=deadline, max_bytes=max_bytes)
        if response.status_code in REDIRECTS:
            location = response.headers.get("Location", "")
            if not location:
                raise FetchFailed(MSG_HTTP.format(url=_short(current), status=response.status_code))
            current = _checked_url(urljoin(current, location), allowed, blocked)
            continue
        if response.status_code != 200:
            raise FetchFailed(MSG_HTTP.format(url=_short(current), status=response.status_code))
        return _page(current, response, max_content_tokens=max_content_tokens, deadline=deadline)
    raise FetchFailed(MSG_TOO_MANY_REDIRECTS.format(limit=max_redirects))


def _get(url: str, *, deadline: float, max_bytes: int) -> http.Response:
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchFailed(MSG_TRANSPORT.format(url=_short(url), why="timeout"))
    timeouts = http.Timeouts(connect=min(5.0, left), read=min(10.0, left), total=left)
    try:
        return http.request(
            "GET", url, headers={"Accept": ACCEPT, "User-Agent": "model-gateway (web fetch)"},
            timeouts=timeouts, max_body=max_bytes,
        )  # fmt: skip
    except http.ConnectionRefused:
        raise FetchRefused(MSG_PRIVATE.format(url=_short(url))) from None
    except http.ResponseTooLarge:
        raise FetchRefused(MSG_TOO_LARGE.format(mib=max(1, max_bytes // (1024 * 1024)))) from None
    except http.TransportError as error:
        raise FetchFailed(MSG_TRANSPORT.format(url=_short(url), why=error.kind)) from None


def _media_type(response: http.Response) -> str:
    return response.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _decode(data: bytes, response: http.Response) -> str:
    content_type = response.headers.get("Content-Type", "")
    charset = ""
    for param in content_type.split(";")[1:]:
        name, _, value = param.strip().partition("=")
        if name.lower() == "charset":
            charset = value.strip().strip('"')
    for encoding in (charset, "utf-8"):
        if encoding:
            try:
                return data.decode(encoding)
            except (LookupError, UnicodeDecodeError):
                continue
    return data.decode("cp1252", errors="replace")


def _page(url: str, response: http.Response, *, max_content_tokens: int | None, deadline: float) -> FetchedPage:
    media = _media_type(response)
    data = response.content
    title = ""
    if media in PDF_TYPES or data[:1024].lstrip().startswith(b"%PDF-"):
        media = "application/pdf"
        text = _pdf_text(url, data, deadline)
    elif media in HTML_TYPES or (not media and data[:512].lstrip()[:15].lower().startswith((b"<!doctype", b"<html"))):
        import trafilatura  # here, not at import: ~7 MB a worker carries only once it fetches a page
        from trafilatura.metadata import extract_metadata

        html = _decode(data, response)
        text = trafilatura.extract(
            html, output_format="markdown", include_tables=True, include_comments=False, favor_recall=True
        ) or (trafilatura.html2txt(html) or "")
        metadata = extract_metadata(html)
        title = (metadata.title or "").strip() if metadata is not None else ""
        media = media or "text/html"
    elif media in TEXT_TYPES or media.startswith("text/") or media.endswith(("+json", "+xml")):
        text = _decode(data, response)
    else:
        raise FetchRefused(MSG_TYPE.format(type=media or "unknown"))
    text = text.strip()
    if not text:
        raise FetchFailed(MSG_NO_TEXT.format(url=_short(url)))
    truncated = False
    if max_content_tokens is not None and len(text) > max_content_tokens * CHARS_PER_TOKEN:
        text, truncated = text[: max(1, int(max_content_tokens)) * CHARS_PER_TOKEN], True
    return FetchedPage(url=url, title=title[:300], text=text, content_type=media, truncated=truncated)


def _pdf_text(url: str, data: bytes, deadline: float) -> str:
    name = urlsplit(url).path.rsplit("/", 1)[-1] or "document.pdf"
    loaded = LoadedFile(name=name[:200], data=data, kind="pdf", hash=hashlib.sha256(data).hexdigest())
    try:
        read = pdf_read(loaded, deadline=deadline, images=False)
    except FileRefused as error:
        raise FetchRefused(f"web fetch: {error.message}") from None
    except OutOfTime:
        raise FetchFailed(MSG_TRANSPORT.format(url=_short(url), why="the PDF took too long to read")) from None
    return "\n\n".join(page.text for page in read.pages if page.text.strip())
