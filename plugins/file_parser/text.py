"""Text files as the model reads them: plain text and Markdown as they are, CSV and JSON checked (a broken
file is refused, not passed on half-read), HTML reduced to its main text by trafilatura (boilerplate, scripts
and markup removed), in a child process within the request's parsing budget (plugins.common.documents.html_child)."""

import codecs
import csv
import io
import json

from plugins.common.documents.errors import FileRefused
from plugins.common.documents.loaded import LoadedFile
from plugins.common.documents.sandbox import html_read
from plugins.file_parser.sources import MAX_FILE_BYTES

MAX_HTML_BYTES = 5 * 1024 * 1024  # trafilatura builds a tree of the whole document


def text_of(file: LoadedFile, *, deadline: float) -> str:
    """The file's text; an HTML file is extracted in a child within the request's parsing budget (`deadline`)."""
    text = _decoded(file)
    if file.kind == "csv":
        _check_csv(text, file.name)
    elif file.kind == "json":
        _check_json(text, file.name)
    elif file.kind == "html":
        return _html_text(file, text, deadline)
    return text


BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip  # UTF-32 first: its little-endian BOM begins like UTF-16's


def _decoded(file: LoadedFile) -> str:
    encoding = next((name for bom, name in BOMS if file.data.startswith(bom)), None)
    if encoding is not None:  # Windows tools save "Unicode" text as UTF-16 with a BOM
        return file.data.decode(encoding, errors="replace")
    try:
        return file.data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return file.data.decode("cp1252", errors="replace")  # legacy exports (CSV from spreadsheets): best effort


def _check_csv(text: str, name: str) -> None:
    if csv.field_size_limit() < MAX_FILE_BYTES:  # the default, 128 KiB, refused valid files with a long field
        csv.field_size_limit(MAX_FILE_BYTES)
    try:
        for _row in csv.reader(io.StringIO(text)):
            pass
    except csv.Error as error:
        raise FileRefused(name, f"not a valid CSV file ({error})") from None


def _check_json(text: str, name: str) -> None:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        raise FileRefused(name, "not a valid JSON file") from None


def _html_text(file: LoadedFile, html: str, deadline: float) -> str:
    if len(file.data) > MAX_HTML_BYTES:
        raise FileRefused(file.name, f"an HTML file is read up to {MAX_HTML_BYTES // (1024 * 1024)} MiB")
    extracted = html_read(file, html, deadline=deadline)
    if not extracted.strip():
        raise FileRefused(file.name, "the HTML file has no readable text")
    return extracted
