"""file-parser against bad and hostile files: each is a 400 naming the file, quickly, and the worker goes on
serving (encrypted, corrupt, deflate bomb, operator flood, page-tree loop, too many pages, too large, out of the
time budget, a file_url the outbound rules refuse)."""

import io
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pypdf
import pytest
from django.test import override_settings

from plugins.file_parser import sources
from plugins.file_parser import stage as file_parser
from tests.plugins.test_file_parser import (  # noqa: F401  (fixtures)
    annotating,
    ask,
    file_part,
    pdf_bytes,
    stream,
    text_only,
    text_pdf,
    upstream_text,
)
from tests.support import assert_error_envelope

pytestmark = pytest.mark.usefixtures("text_only")  # files are parsed: the model takes no file input


def refused(persona, part: dict, name: str, why: str) -> str:
    body = assert_error_envelope(ask(persona, [part]), 400)
    message = body["error"]["message"]
    assert f"'{name}'" in message and why in message, message
    return message


def one_page(content: bytes, extra: bytes = b"") -> bytes:
    return pdf_bytes(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            stream(content, extra),
        ]
    )


def test_an_encrypted_pdf_is_refused(alice):
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(text_pdf("secret plans"))))
    writer.encrypt(user_password="hunter2", algorithm="AES-128")
    locked = io.BytesIO()
    writer.write(locked)
    refused(alice, file_part(locked.getvalue(), filename="locked.pdf"), "locked.pdf", "encrypted")


def test_a_corrupt_pdf_is_refused(alice):
    refused(alice, file_part(b"%PDF-1.7\n1 0 obj << /Type /Cat", filename="broken.pdf"), "broken.pdf", "corrupt")


def test_a_truncated_pdf_is_refused(alice):
    pdf = text_pdf("cut short")
    refused(alice, file_part(pdf[: len(pdf) // 3], filename="cut.pdf"), "cut.pdf", "")


def test_a_deflate_bomb_stops_at_the_decompression_limit(alice):
    bomb = zlib.compress(b"BT ET " * 6_000_000, 9)  # 36 MB of content stream in about 40 KB
    assert len(bomb) < 100_000
    refused(alice, file_part(one_page(bomb, b"/Filter /FlateDecode"), filename="bomb.pdf"), "bomb.pdf", "page 1")
    assert ask(alice, [file_part(text_pdf("still serving"))]).status_code == 200  # the worker goes on


def test_an_operator_flood_stops_at_the_parsing_limit(alice):
    flood = b"BT /F1 12 Tf " + b"(x) Tj " * 800_000 + b"ET"  # 1.6 million tokens on one page
    refused(alice, file_part(text_pdf("placeholder", content=flood), filename="flood.pdf"), "flood.pdf", "page 1")


def test_a_page_tree_that_loops_is_refused(alice):
    looping = pdf_bytes([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>"])
    refused(alice, file_part(looping, filename="loop.pdf"), "loop.pdf", "")


def test_too_many_pages_are_refused_before_reading_them(alice, monkeypatch):
    monkeypatch.setattr("plugins.common.documents.sandbox.MAX_PDF_PAGES", 3)
    refused(alice, file_part(text_pdf("a", "b", "c", "d"), filename="long.pdf"), "long.pdf", "4 pages; at most 3")


def test_a_file_over_the_size_limit_is_refused(alice, monkeypatch):
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 1024)
    refused(alice, file_part(b"x" * 4096, "text/plain", "big.txt"), "big.txt", "larger than")


def test_parsing_past_the_time_budget_is_refused(alice, monkeypatch):
    monkeypatch.setattr(file_parser, "PARSE_SECONDS", -1)  # the budget is spent before the first page
    refused(alice, file_part(text_pdf("slow"), filename="slow.pdf"), "slow.pdf", "longer than")


def test_a_binary_file_of_unknown_type_is_refused(alice):
    refused(alice, file_part(b"\x00\x01\x02binary", "application/zip", "a.zip"), "a.zip", "unsupported file type")


def test_a_file_id_cannot_be_parsed(alice):
    part = {"type": "input_file", "file_id": "file-abc", "filename": "stored.pdf"}
    refused(alice, part, "stored.pdf", "file_id")


# ---- file_url ---------------------------------------------------------------------------------------------


class _Files(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, str, bytes]] = {}

    def do_GET(self):
        if self.path.startswith("/drip.txt"):  # a byte every 0.1 s for 3 s: within every per-read timeout
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "30")
            self.end_headers()
            for _ in range(30):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
            return
        status, media_type, body = self.routes.get(self.path, (404, "text/plain", b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        if status in (301, 302):
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def file_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def url_part(url: str) -> dict:
    return {"type": "input_file", "file_url": url}


def test_a_file_url_on_loopback_is_refused(alice, file_server):
    _Files.routes = {"/report.pdf": (200, "application/pdf", text_pdf("internal only"))}
    refused(alice, url_part(f"{file_server}/report.pdf"), "report.pdf", "not a public address")


def test_a_file_url_is_fetched_where_the_operator_allows_it(alice, file_server, standin_catalog):
    _Files.routes = {"/minutes.pdf": (200, "application/pdf", text_pdf("Minutes of the board"))}
    with override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True):
        response = ask(alice, [url_part(f"{file_server}/minutes.pdf")])
    assert response.status_code == 200, response.content
    sent = upstream_text(standin_catalog)
    assert "Minutes of the board" in sent and "File: minutes.pdf" in sent


def test_a_file_url_redirect_is_not_followed(alice, file_server):
    _Files.routes = {"/moved": (302, "text/plain", b"")}
    with override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True):
        refused(alice, url_part(f"{file_server}/moved"), "moved", "redirect")


def test_a_file_url_over_the_size_limit_is_refused(alice, file_server, monkeypatch):
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 1024)
    _Files.routes = {"/huge.txt": (200, "text/plain", b"y" * 10_000)}
    with override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True):
        refused(alice, url_part(f"{file_server}/huge.txt"), "huge.txt", "larger than")


def test_a_pdf_that_decodes_to_more_than_the_memory_limit_is_refused(alice, monkeypatch):
    monkeypatch.setattr("plugins.common.documents.sandbox.MAX_PARSE_MEMORY", 64 * 1024 * 1024)
    # Each page's content is a 15 MB comment (within pypdf's per-stream limit, no tokens, no text) compressed to
    # 15 KB; pypdf keeps what it decoded, so 10 pages need 150 MB: the child stops at its address-space limit.
    comment = zlib.compress(b"%" + b"A" * 15_000_000 + b"\n", 9)
    kids = b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(10))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count 10 >>" % kids]
    for index in range(10):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>" % (4 + 2 * index))
        objects.append(stream(comment, b"/Filter /FlateDecode"))
    refused(alice, file_part(pdf_bytes(objects), filename="hog.pdf"), "hog.pdf", "memory")
    assert ask(alice, [file_part(text_pdf("still serving"))]).status_code == 200


def test_a_page_that_outlasts_the_budget_is_cut_off(alice, monkeypatch):
    monkeypatch.setattr(file_parser, "PARSE_SECONDS", 0.3)
    # ~2 s of pypdf for its one page, within its parsing limits (pypdf 7 counts operators: 800,000 short ones
    # reach stream_parsing_work_maximum_count in 0.5 s, before the budget)
    flood = b"BT /F1 12 Tf " + (b"(" + b"x" * 200 + b") Tj ") * 10_000 + b"ET"
    refused(alice, file_part(text_pdf("placeholder", content=flood), filename="slow.pdf"), "slow.pdf", "longer than")


def test_an_html_file_that_takes_long_to_extract_is_cut_off_at_the_budget(alice, monkeypatch):
    """trafilatura takes ~11 s per MB of plain paragraphs (4.5 MB: 50 s in the worker); it runs in a child killed
    at the request's parsing budget."""
    monkeypatch.setattr(file_parser, "PARSE_SECONDS", 0.5)
    page = b"<html><body>" + b"<p>hello world</p>" * 100_000  # 1.8 MB: ~20 s of extraction
    started = time.monotonic()
    refused(alice, file_part(page, "text/html", "slow.html"), "slow.html", "longer than")
    assert time.monotonic() - started < 5


def test_an_html_file_is_still_reduced_to_its_text(alice, text_only):  # noqa: F811
    page = b"<html><body><nav>Menu</nav><article><p>" + b"The quarterly figures rose. " * 20 + b"</p></article>"
    response = ask(alice, [file_part(page, "text/html", "news.html")])
    assert response.status_code == 200, response.content
    assert "The quarterly figures rose." in upstream_text(text_only)


def test_slow_file_urls_share_one_fetching_budget(alice, file_server, monkeypatch):
    """Each file_url had its own 20 s; a request of many slow URLs held the worker for all of them in turn."""
    monkeypatch.setattr(sources, "FETCH_SECONDS", 0.5)
    parts = [url_part(f"{file_server}/drip.txt?{number}") for number in range(4)]
    started = time.monotonic()
    with override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True):
        body = assert_error_envelope(ask(alice, parts), 400)
    assert "fetching took longer than 0.5 s" in body["error"]["message"]
    assert time.monotonic() - started < 2.5  # one budget, not 4 x 3 s


def test_a_file_url_that_is_not_a_url_is_a_400_naming_the_file(alice, standin_catalog):
    part = {"type": "input_file", "file_url": "http://[not-an-address/doc.pdf"}
    body = {
        "model": "standin/echo",
        "input": [{"type": "message", "role": "user", "content": [part]}],
        "plugins": [{"id": "file-parser", "pdf": {"engine": "pdf-text"}}],
    }
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == 400
