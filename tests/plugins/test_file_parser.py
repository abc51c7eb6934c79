"""file-parser through the stand-in: files become text that reaches the upstream when the model does not read
files itself (or an engine is asked for), scanned pages go to the OCR engine, the answer carries file
annotations (JSON and stream) that skip parsing the file again, and `enabled: false` turns it off. The PDFs are
written by hand here (real PDF syntax, read by pypdf like any other)."""

import base64
import hashlib
import json
import zlib
from decimal import Decimal
from urllib.parse import quote

import pytest
from django.test import override_settings

from gateway.accounts.models import Account
from gateway.billing.models import Generation
from plugins.file_parser.stage import FileAnnotationStage
from responses_api import stages
from routing.models import Endpoint, Model, Provider
from routing.services import provider_credential_set
from tests.support import STANDIN_KEY, assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
OCR_TEXT = "INVOICE 1234 TOTAL 42 EUR"

# ---- PDFs -------------------------------------------------------------------------------------------------


def pdf_bytes(objects: list[bytes]) -> bytes:
    """A PDF of the given objects (object 1 is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def text_pdf(*pages: str, content: bytes | None = None) -> bytes:
    """Pages with a text layer (Helvetica, one line each), or one page of the given content stream."""
    count = len(pages)
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, text in enumerate(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % (5 + 2 * index)
        )
        objects.append(stream(content or b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode("latin-1")))
    return pdf_bytes(objects)


def scanned_pdf() -> bytes:
    """One page with no text layer: only an image (8-bit grey, Flate), as a scanner writes it."""
    pixels = bytes(range(0, 256, 16)) * 16  # 16 x 16
    return pdf_bytes(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 5 0 R >> >> "
            b"/Contents 4 0 R >>",
            stream(b"q 500 0 0 700 50 50 cm /Im1 Do Q"),
            stream(
                zlib.compress(pixels),
                b"/Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray /BitsPerComponent 8 "
                b"/Filter /FlateDecode",
            ),
        ]
    )


def mixed_pdf(text: str, jpeg: bytes) -> bytes:
    """Page 1 with a text layer, page 2 a scan stored as JPEG (DCTDecode), the usual scanner output."""
    return pdf_bytes(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R 6 0 R] /Count 2 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents 5 0 R >>",
            stream(b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode()),
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Scan 8 0 R >> >> "
            b"/Contents 7 0 R >>",
            stream(b"q 612 0 0 792 0 0 cm /Scan Do Q"),
            stream(
                jpeg,
                b"/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceRGB /BitsPerComponent 8 "
                b"/Filter /DCTDecode",
            ),
        ]
    )


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


# ---- requests ---------------------------------------------------------------------------------------------


def file_part(data: bytes, media_type: str = "application/pdf", filename: str = "report.pdf") -> dict:
    return {"type": "input_file", "filename": filename, "file_data": data_url(data, media_type)}


def ask(persona, parts: list[dict], *, stream=False, plugins=None, history=(), **body):
    message = {"role": "user", "content": [{"type": "input_text", "text": "Summarise the file."}, *parts]}
    payload = {
        "model": "standin/echo",
        "input": [*history, message],
        "provider": {"sort": "price"},
        "stream": stream,
        **({"plugins": plugins} if plugins is not None else {}),
        **body,
    }
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def upstream_text(standin) -> str:
    """What the model was sent last (the chat wire's messages, as JSON)."""
    calls = [call for call in standin.requests_for("/chat/completions") if "OCR engine" not in json.dumps(call)]
    return json.dumps(calls[-1]["body"]["messages"])


def entry(body: dict) -> dict:
    return next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "file-parser")


@pytest.fixture
def annotating(monkeypatch):
    """The annotation post-stage configured (once, whether or not the settings list it yet)."""
    if not any(isinstance(stage, FileAnnotationStage) for stage in stages.POST_STAGES):
        monkeypatch.setattr(stages, "POST_STAGES", [*stages.POST_STAGES, FileAnnotationStage()])


@pytest.fixture
def text_only(standin_catalog, annotating):
    """standin/echo as a model that takes no file input (so files are parsed by the gateway)."""
    model = Model.objects.get(pk="standin/echo")
    model.input_modalities = ["text", "image"]
    model.save()
    return standin_catalog


@pytest.fixture
def ocr_model(standin_catalog):
    """A vision model for the OCR engine: a stand-in provider scripted to answer OCR_TEXT."""
    provider = Provider.objects.create(
        slug="standin-vision",
        name="Stand-in vision",
        adapter="openai_chat",
        base_url=f"{standin_catalog.url}/s/text={quote(OCR_TEXT)}/v1",
        is_local_standin=True,
        allow_private_network=True,
    )
    provider_credential_set(provider=provider, plaintext=STANDIN_KEY)
    model = Model.objects.create(
        id="standin/vision", name="Stand-in vision", context_length=32768, input_modalities=["text", "image"]
    )
    Endpoint.objects.create(
        model=model,
        provider=provider,
        upstream_model="standin-vision",
        price_prompt=Decimal("2"),
        price_completion=Decimal("4"),
        context_length=32768,
    )
    with override_settings(FILE_PARSER_OCR_MODEL="standin/vision"):
        yield standin_catalog


# ---- PDFs with a text layer -------------------------------------------------------------------------------


def test_a_pdf_text_layer_reaches_the_model(alice, text_only):
    pdf = text_pdf("Quarterly revenue rose 12 percent", "Headcount stayed at 40")
    response = ask(alice, [file_part(pdf)])
    assert response.status_code == 200, response.content
    sent = upstream_text(text_only)
    assert "Quarterly revenue rose 12 percent" in sent and "Headcount stayed at 40" in sent
    assert "File: report.pdf" in sent and "input_file" not in sent and '"file"' not in sent
    body = response.json()
    assert entry(body)["data"] | {"pdf_parse_ms": 0} == {
        "files": 1,
        "pages": 2,
        "engine": "pdf-text",
        "reused": 0,
        "pdf_parse_ms": 0,
    }
    assert entry(body)["summary"] == "parsed 1 file(s)" and "cost_usd" not in entry(body)
    generation = Generation.objects.get(account_id=alice.account_id)
    assert generation.plugins["file-parser"] == {"files": 1, "pages": 2, "engine": "pdf-text"}


def test_the_answer_carries_the_file_annotation(alice, text_only):
    pdf = text_pdf("The launch date is 3 March")
    body = ask(alice, [file_part(pdf)]).json()
    [annotation] = body["output"][0]["content"][0]["annotations"]
    assert annotation["type"] == "file"
    assert annotation["file"]["hash"] == hashlib.sha256(pdf).hexdigest()
    assert annotation["file"]["name"] == "report.pdf"
    assert "The launch date is 3 March" in annotation["file"]["content"][0]["text"]


def test_a_file_sent_back_with_its_annotation_is_not_parsed_again(alice, text_only):
    pdf = text_pdf("The launch date is 3 March")
    first = ask(alice, [file_part(pdf)]).json()
    answer = first["output"][0]
    # The caller edits nothing but the annotation's text: what reaches the model shows where the text came from.
    answer["content"][0]["annotations"][0]["file"]["content"] = [{"type": "text", "text": "FROM THE ANNOTATION"}]
    history = [
        {"role": "user", "content": [{"type": "input_text", "text": "Summarise the file."}, file_part(pdf)]},
        {"type": "message", "role": "assistant", "content": answer["content"]},
    ]
    second = ask(alice, [file_part(pdf)], history=history)
    assert second.status_code == 200, second.content
    sent = upstream_text(text_only)
    assert "FROM THE ANNOTATION" in sent and "The launch date is 3 March" not in sent
    assert entry(second.json())["data"]["reused"] == 2 and entry(second.json())["data"]["pages"] == 0
    assert entry(second.json())["summary"] == "parsed 0 file(s), 2 from annotations"


def test_a_streamed_answer_carries_the_annotation(alice, text_only):
    pdf = text_pdf("Streaming works too")
    events, _ = sse_events(ask(alice, [file_part(pdf)], stream=True))
    digest = hashlib.sha256(pdf).hexdigest()
    part_done = next(e for e in events if e["type"] == "response.content_part.done")
    assert [a["file"]["hash"] for a in part_done["part"]["annotations"]] == [digest]
    item_done = next(e for e in events if e["type"] == "response.output_item.done")
    assert item_done["item"]["content"][0]["annotations"] == part_done["part"]["annotations"]
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["output"][0]["content"][0]["annotations"] == part_done["part"]["annotations"]
    assert "Streaming works too" in upstream_text(text_only)


# ---- other kinds of file ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "media_type", "content", "expected"),
    [
        ("notes.txt", "text/plain", "Plain notes: buy milk", "Plain notes: buy milk"),
        ("readme.md", "text/markdown", "# Title\n\n* point one", "# Title\\n\\n* point one"),
        ("table.csv", "text/csv", "city,people\nParis,2100000\n", "city,people\\nParis,2100000"),
        ("data.json", "application/json", '{"answer": 42}', '{\\"answer\\": 42}'),
    ],
)
def test_text_files_reach_the_model(alice, text_only, filename, media_type, content, expected):
    response = ask(alice, [file_part(content.encode(), media_type, filename)])
    assert response.status_code == 200, response.content
    sent = upstream_text(text_only)
    assert expected in sent and f"File: {filename}" in sent
    assert entry(response.json())["data"]["pages"] == 0


def test_html_is_reduced_to_its_text(alice, text_only):
    html = (
        "<html><head><title>T</title><script>var tracking = 'SECRET_SCRIPT';</script></head><body>"
        "<nav>Home | About</nav><article><h1>The harbour reopens</h1>"
        "<p>The old harbour reopens on Monday after two years of repairs to the sea wall and the quays.</p>"
        "<p>Ferries to the islands resume their summer timetable the same week.</p></article></body></html>"
    )
    response = ask(alice, [file_part(html.encode(), "text/html", "news.html")])
    assert response.status_code == 200, response.content
    sent = upstream_text(text_only)
    assert "The old harbour reopens on Monday" in sent
    assert "SECRET_SCRIPT" not in sent and "<p>" not in sent
    assert entry(response.json())["data"]["engine"] == "html"


def test_a_broken_json_file_is_refused_by_name(alice, text_only):
    body = assert_error_envelope(ask(alice, [file_part(b'{"answer": ', "application/json", "data.json")]), 400)
    assert "data.json" in body["error"]["message"] and "JSON" in body["error"]["message"]


# ---- when it runs -----------------------------------------------------------------------------------------


def test_a_model_that_reads_files_gets_the_file_itself(alice, standin_catalog, annotating):
    pdf = text_pdf("Native please")
    response = ask(alice, [file_part(pdf)])
    assert response.status_code == 200
    sent = upstream_text(standin_catalog)
    assert base64.b64encode(pdf).decode() in sent and "Native please" not in sent
    assert not [e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "file-parser"]
    assert response.json()["output"][0]["content"][0]["annotations"] == []


def test_an_engine_asked_for_parses_even_for_a_model_that_reads_files(alice, standin_catalog, annotating):
    plugins = [{"id": "file-parser", "pdf": {"engine": "pdf-text"}}]
    response = ask(alice, [file_part(text_pdf("Parsed on request"))], plugins=plugins)
    assert response.status_code == 200, response.content
    assert "Parsed on request" in upstream_text(standin_catalog)
    assert entry(response.json())["data"]["engine"] == "pdf-text"


def test_enabled_false_turns_automatic_parsing_off(alice, text_only):
    pdf = text_pdf("Do not parse me")
    response = ask(alice, [file_part(pdf)], plugins=[{"id": "file-parser", "enabled": False}])
    assert response.status_code == 200, response.content
    sent = upstream_text(text_only)
    assert "Do not parse me" not in sent and base64.b64encode(pdf).decode() in sent  # the file itself went on
    assert not [e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "file-parser"]


def test_native_engine_passes_the_file_on(alice, standin_catalog, annotating):
    plugins = [{"id": "file-parser", "pdf": {"engine": "native"}}]
    pdf = text_pdf("Native engine")
    response = ask(alice, [file_part(pdf)], plugins=plugins)
    assert response.status_code == 200, response.content
    assert base64.b64encode(pdf).decode() in upstream_text(standin_catalog)
    assert entry(response.json())["summary"] == "native"


def test_native_engine_without_a_model_that_reads_files_is_400(alice, text_only):
    plugins = [{"id": "file-parser", "pdf": {"engine": "native"}}]
    body = assert_error_envelope(ask(alice, [file_part(text_pdf("x"))], plugins=plugins), 400)
    assert "native" in body["error"]["message"] and "accepts file input" in body["error"]["message"]


# ---- scanned pages: the OCR engine ------------------------------------------------------------------------


def test_a_scanned_page_goes_to_the_ocr_engine(alice, text_only, ocr_model):
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    response = ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins)
    assert response.status_code == 200, response.content
    [ocr_call] = [c for c in text_only.requests_for("/chat/completions") if "OCR engine" in json.dumps(c)]
    image = ocr_call["body"]["messages"][-1]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert ocr_call["body"]["model"] == "standin-vision"
    sent = upstream_text(text_only)
    assert OCR_TEXT in sent and "File: scan.pdf" in sent
    data = entry(response.json())
    assert data["data"]["engine"] == "pdf-text+ocr" and data["data"]["ocr_pages"] == 1 and data["cost_usd"] > 0
    assert Decimal(str(response.json()["usage"]["cost"])) >= Decimal(str(data["cost_usd"]))  # charged with it


def test_scanned_pages_use_the_ocr_engine_by_default_when_configured(alice, text_only, ocr_model):
    response = ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")])
    assert response.status_code == 200, response.content
    assert OCR_TEXT in upstream_text(text_only)


def test_an_ocr_engine_that_is_not_configured_is_400(alice, text_only):
    plugins = [{"id": "file-parser", "pdf": {"engine": "cloudflare-ai"}}]
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf())], plugins=plugins), 400)
    assert "cloudflare-ai" in body["error"]["message"] and "not configured" in body["error"]["message"]


def test_a_scan_without_an_ocr_engine_is_400_not_an_empty_file(alice, text_only):
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")]), 400)
    assert "scan.pdf" in body["error"]["message"] and "no text layer" in body["error"]["message"]


def test_the_same_file_twice_in_one_request_is_parsed_once(alice, text_only):
    pdf = text_pdf("Only once")
    response = ask(alice, [file_part(pdf), file_part(pdf, filename="copy.pdf")])
    assert response.status_code == 200, response.content
    data = entry(response.json())["data"]
    assert data["files"] == 2 and data["pages"] == 1
    annotations = response.json()["output"][0]["content"][0]["annotations"]
    assert len(annotations) == 1  # one per file content (by hash)


def test_only_the_scanned_page_of_a_mixed_pdf_goes_to_ocr_as_the_jpeg_it_holds(alice, text_only, ocr_model):
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00 scanned page bytes \xff\xd9"
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    response = ask(alice, [file_part(mixed_pdf("Cover letter", jpeg), filename="mixed.pdf")], plugins=plugins)
    assert response.status_code == 200, response.content
    [ocr_call] = [c for c in text_only.requests_for("/chat/completions") if "OCR engine" in json.dumps(c)]
    image = ocr_call["body"]["messages"][-1]["content"][1]["image_url"]["url"]
    assert image == data_url(jpeg, "image/jpeg")  # the stored JPEG, unchanged
    sent = upstream_text(text_only)
    assert "[Page 1]\\nCover letter" in sent and f"[Page 2]\\n{OCR_TEXT}" in sent
    assert entry(response.json())["data"]["ocr_pages"] == 1


def test_more_scanned_pages_than_the_ocr_cap_are_refused(alice, text_only, ocr_model, monkeypatch):
    monkeypatch.setattr("plugins.file_parser.ocr.MAX_OCR_PAGES", 0)
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins), 400)
    assert "scan.pdf" in body["error"]["message"] and "scanned pages" in body["error"]["message"]


def test_a_scan_with_the_text_layer_engine_is_400(alice, text_only, ocr_model):
    plugins = [{"id": "file-parser", "pdf": {"engine": "pdf-text"}}]
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins), 400)
    assert "scan.pdf" in body["error"]["message"] and "'pdf-text' reads only" in body["error"]["message"]
    assert body["error"]["metadata"]["filename"] == "scan.pdf"


def test_a_scan_whose_image_cannot_be_sent_to_ocr_is_400(alice, text_only, ocr_model):
    fax = scanned_pdf().replace(b"/Filter /FlateDecode", b"/Filter /CCITTFaxDecode")  # needs a converter we lack
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    body = assert_error_envelope(ask(alice, [file_part(fax, filename="fax.pdf")], plugins=plugins), 400)
    assert "fax.pdf" in body["error"]["message"] and "no text could be read" in body["error"]["message"]


def two_scanned_pages() -> bytes:
    pixels = bytes(range(0, 256, 16)) * 16
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 7 0 R >> >> "
    return pdf_bytes(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>",
            page + b"/Contents 4 0 R >>",
            stream(b"q 500 0 0 700 50 50 cm /Im1 Do Q"),
            page + b"/Contents 6 0 R >>",
            stream(b"q 500 0 0 700 50 50 cm /Im1 Do Q"),
            stream(
                zlib.compress(pixels),
                b"/Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray /BitsPerComponent 8 "
                b"/Filter /FlateDecode",
            ),
        ]
    )


def test_a_pdf_with_more_scanned_pages_than_the_cap_sends_none_of_them_to_ocr(alice, text_only, ocr_model, monkeypatch):
    monkeypatch.setattr("plugins.file_parser.ocr.MAX_OCR_PAGES", 1)
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    body = assert_error_envelope(ask(alice, [file_part(two_scanned_pages(), filename="two.pdf")], plugins=plugins), 400)
    assert "two.pdf" in body["error"]["message"] and "more than 1 scanned pages" in body["error"]["message"]
    assert [c for c in text_only.requests_for("/chat/completions") if "OCR engine" in json.dumps(c)] == []
    assert not Generation.objects.filter(account_id=alice.account_id).exists()  # nothing ran, nothing charged


def test_ocr_calls_made_before_a_file_is_refused_are_charged(alice, text_only, ocr_model):
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}]
    parts = [file_part(scanned_pdf(), filename="scan.pdf"), file_part(b"%PDF-1.7\nbroken", filename="broken.pdf")]
    balance = Account.objects.get(pk=alice.account_id).balance
    body = assert_error_envelope(ask(alice, parts, plugins=plugins), 400)
    assert "broken.pdf" in body["error"]["message"]
    (record,) = Generation.objects.filter(account_id=alice.account_id)
    assert record.status == "failed" and record.error_type == "blocked" and record.cost > 0
    account = Account.objects.get(pk=alice.account_id)
    assert account.balance == balance - record.cost and account.reserved == 0


def test_ocr_calls_are_charged_when_moderation_then_refuses_the_parsed_text(
    alice, text_only, ocr_model, settings, monkeypatch
):
    from tests.plugins.test_moderation import moderations_engine

    moderations_engine(settings, text_only)
    monkeypatch.setattr("plugins.moderation.stage.MAX_TEXT_CHARS", 20)  # the OCR page's text makes the input too long
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}, {"id": "moderation"}]
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins), 413)
    assert "Moderation reads at most 20 characters" in body["error"]["message"]
    (record,) = Generation.objects.filter(account_id=alice.account_id)
    assert record.error_type == "blocked" and record.cost > 0  # the OCR page's call


@pytest.mark.parametrize(
    ("media_type", "filename"), [("text/plain", "notes.txt"), ("application/octet-stream", "notes")]
)
def test_a_utf16_text_file_reaches_the_model_as_its_text(alice, text_only, media_type, filename):
    data = "Notes: café ünïcode".encode("utf-16")  # with its BOM, as Windows tools save "Unicode" text
    response = ask(alice, [file_part(data, media_type, filename)])
    assert response.status_code == 200, response.content
    assert "Notes: caf\\u00e9 \\u00fcn\\u00efcode" in upstream_text(text_only)


def test_ocr_calls_are_charged_when_the_guardrails_then_deny_the_moderation_engine(
    alice, text_only, ocr_model, settings
):
    from tests.guardrails.test_enforcement import guardrail
    from tests.plugins.test_moderation import moderations_engine

    moderations_engine(settings, text_only)
    guardrail(alice, ignored_providers=["standin-mod"])  # the OCR model's provider stays allowed
    plugins = [{"id": "file-parser", "pdf": {"engine": "mistral-ocr"}}, {"id": "moderation"}]
    body = assert_error_envelope(ask(alice, [file_part(scanned_pdf(), filename="scan.pdf")], plugins=plugins), 403)
    assert "Team policy" in body["error"]["message"]
    (record,) = Generation.objects.filter(account_id=alice.account_id)
    assert record.error_type == "blocked" and record.cost > 0  # the OCR page's call


def test_a_csv_with_a_field_longer_than_128_kib_is_read(alice, text_only):
    Endpoint.objects.filter(model_id="standin/echo").update(context_length=200_000)
    data = b'id,notes\n1,"' + b"long note " * 20_000 + b'"\n2,short\n'  # 200 kB in one field: valid CSV
    response = ask(alice, [file_part(data, "text/csv", "notes.csv")])
    assert response.status_code == 200, response.content
    assert "2,short" in upstream_text(text_only)
