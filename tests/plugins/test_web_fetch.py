"""Web fetch: pages served by the stand-in on loopback read as clean text (HTML, text, Markdown, JSON, PDF), limits
(size, redirects, max_content_tokens, content types), allowed/blocked domains checked on every hop, and the SSRF
refusals: loopback, the metadata address, private ranges, a DNS name resolving to loopback, and redirects to
them. Loopback is where the test pages are, so most tests allow private networks (the operator's
OUTBOUND_ALLOW_PRIVATE_NETWORKS); the SSRF tests keep the real rule, and the redirect tests treat the stand-in's
address alone as "the internet" (at the address policy routing.http checks at connect time)."""

import pytest

from plugins.web_fetch import fetch as fetch_module
from plugins.web_fetch.fetch import FetchedPage, FetchFailed, FetchRefused, fetch
from routing import http
from routing.http import destinations


@pytest.fixture
def pages(settings, standin):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    standin.clear()
    return standin


def page_requests(standin) -> list[dict]:
    return [call for call in standin.requests_for("") if call["path"].startswith("/pages/")]


def test_an_html_page_becomes_its_main_text_as_markdown(pages):
    page = fetch(f"{pages.url}/pages/article.html")
    assert isinstance(page, FetchedPage)
    assert page.title == "The stand-in article" and page.content_type == "text/html" and page.status == 200
    assert page.text.startswith("# The stand-in article")
    assert "STANDIN-ARTICLE-TEXT" in page.text
    for boilerplate in ("do not read me", "color: red", "Login", "cookie banner"):
        assert boilerplate not in page.text
    assert not page.truncated


@pytest.mark.parametrize(
    ("name", "content_type", "marker"),
    [
        ("notes.txt", "text/plain", "STANDIN-NOTES-TEXT"),
        ("readme.md", "text/markdown", "STANDIN-README-TEXT"),
        ("data.json", "application/json", "STANDIN-JSON-TEXT"),
        ("doc.pdf", "application/pdf", "STANDIN-PDF-TEXT"),  # through the file-parser's sandboxed PDF reader
    ],
)
def test_text_markdown_json_and_pdf_pages_are_read(pages, name, content_type, marker):
    page = fetch(f"{pages.url}/pages/{name}")
    assert page.content_type == content_type and marker in page.text


def test_max_content_tokens_cuts_the_text(pages):
    page = fetch(f"{pages.url}/pages/article.html", max_content_tokens=10)
    assert page.truncated and len(page.text) == 40


def test_content_a_model_cannot_read_is_refused(pages):
    with pytest.raises(FetchRefused) as refused:
        fetch(f"{pages.url}/pages/image.png")
    assert refused.value.status == 400 and "content type 'image/png' cannot be read" in refused.value.message


def test_a_page_over_the_size_limit_is_refused(pages, settings):
    settings.WEB_FETCH_MAX_BYTES = 100_000
    with pytest.raises(FetchRefused, match="larger than 1 MiB"):
        fetch(f"{pages.url}/pages/big.txt?bytes=200000")
    assert "x" * 1000 in fetch(f"{pages.url}/pages/big.txt?bytes=90000").text


def test_http_errors_and_redirect_loops_are_502s(pages, settings):
    with pytest.raises(FetchFailed) as failed:
        fetch(f"{pages.url}/pages/missing")
    assert failed.value.status == 502 and failed.value.message.endswith("answered HTTP 404")
    settings.WEB_FETCH_MAX_REDIRECTS = 3
    with pytest.raises(FetchFailed, match="more than 3 redirects"):
        fetch(f"{pages.url}/pages/loop")
    assert len([call for call in page_requests(pages) if call["path"] == "/pages/loop"]) == 4


def test_redirects_are_followed_one_at_a_time(pages):
    target = f"{pages.url}/pages/notes.txt"
    page = fetch(f"{pages.url}/pages/redirect?code=301&to=/pages/redirect%3Fcode%3D307%26to%3D{target}")
    assert page.url == target and "STANDIN-NOTES-TEXT" in page.text
    assert [call["path"] for call in page_requests(pages)] == ["/pages/redirect", "/pages/redirect", "/pages/notes.txt"]


def test_allowed_and_blocked_domains(pages):
    host = "127.0.0.1"
    with pytest.raises(FetchRefused) as refused:
        fetch(f"{pages.url}/pages/notes.txt", allowed_domains=["example.com"])
    why = "is not allowed by the request's allowed_domains / blocked_domains"
    assert refused.value.message == f"web fetch: {host} {why}"
    with pytest.raises(FetchRefused):
        fetch(f"http://localhost:{pages.server_address[1]}/pages/notes.txt", blocked_domains=["localhost"])
    assert page_requests(pages) == []
    with pytest.raises(FetchRefused, match="allowed_domains: 'a b' is not a domain pattern"):
        fetch(f"{pages.url}/pages/notes.txt", allowed_domains=["a b"])


def test_a_redirect_to_a_blocked_domain_is_refused_before_it_is_followed(pages):
    port = pages.server_address[1]
    with pytest.raises(FetchRefused, match="localhost is not allowed"):
        fetch(
            f"{pages.url}/pages/redirect?to=http://localhost:{port}/pages/notes.txt",
            blocked_domains=["localhost"],
        )
    assert [call["path"] for call in page_requests(pages)] == ["/pages/redirect"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/pages/notes.txt",  # loopback
        "http://localhost:{port}/pages/notes.txt",  # a DNS name that resolves to loopback
        "http://[::1]:{port}/pages/notes.txt",
        "http://[::ffff:127.0.0.1]:{port}/pages/notes.txt",  # loopback inside an IPv6 form
        "http://2130706433:{port}/pages/notes.txt",  # 127.0.0.1 as one number
        "http://0x7f.1:{port}/pages/notes.txt",
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata address (link-local)
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://172.16.0.1/",
        "http://[fd00::1]/",
        "http://0.0.0.0:{port}/",
    ],
)
def test_ssrf_destinations_are_refused(settings, standin, url):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    standin.clear()
    with pytest.raises(FetchRefused) as refused:
        fetch(url.format(port=standin.server_address[1]))
    assert refused.value.status == 400 and "is not a public address" in refused.value.message
    assert page_requests(standin) == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://example.com/", "http://user:secret@example.com/"])
def test_other_schemes_and_credentials_are_refused(url):
    with pytest.raises(FetchRefused):
        fetch(url)


@pytest.fixture
def standin_is_the_internet(settings, standin, monkeypatch):
    """Only the stand-in's own address counts as public: every other address keeps the real rule."""
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    real = http.is_public_address

    def policy(address: str) -> bool:
        return address == "127.0.0.1" or real(address)

    monkeypatch.setattr(destinations, "is_public_address", policy)
    monkeypatch.setattr(fetch_module, "is_public_address", policy)
    standin.clear()
    return standin


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://127.0.0.2:{port}/pages/notes.txt",
        "http://[::1]:{port}/pages/notes.txt",
        "http://0x7f000002:{port}/pages/notes.txt",
        "http://10.1.2.3/admin",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_redirects_to_private_destinations_are_refused(standin_is_the_internet, target):
    standin = standin_is_the_internet
    assert "STANDIN-NOTES-TEXT" in fetch(f"{standin.url}/pages/notes.txt").text  # the "public" site itself
    standin.clear()
    with pytest.raises(FetchRefused) as refused:
        fetch(f"{standin.url}/pages/redirect?to={target.format(port=standin.server_address[1])}")
    assert "is not a public address" in refused.value.message
    assert [call["path"] for call in page_requests(standin)] == ["/pages/redirect"]
