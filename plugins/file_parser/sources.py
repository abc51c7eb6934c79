"""An `input_file` part's bytes: a base64 `file_data` (a data: URL or bare base64) or a `file_url` fetched
through routing.http (the outbound rules: no private or loopback destination unless the operator allows it, no
redirects, deadlines, a size cap). The kind of file is told by its bytes first (%PDF-), then by its declared
media type, then by its name's extension."""

import base64
import binascii
import hashlib
import re
import time
from urllib.parse import unquote, urlsplit

from plugins.common.documents.errors import FileRefused
from plugins.common.documents.loaded import LoadedFile
from routing import http
from routing.canonical import FilePart

MAX_FILE_BYTES = 16 * 1024 * 1024  # one file, decoded (the request body is capped at 20 MiB anyway)
FETCH_TIMEOUTS = http.Timeouts(connect=5, read=10, total=20)  # one file_url
FETCH_SECONDS = 30.0  # all of a request's file_urls together (each is cut at what is left of it)
MSG_FETCH_LATE = "file_url: fetching took longer than {seconds:g} s (the request's file URLs together)"

KINDS = ("pdf", "text", "markdown", "csv", "json", "html")
MEDIA_TYPES = {
    "application/pdf": "pdf",
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/csv": "csv",
    "application/csv": "csv",
    "application/json": "json",
    "text/json": "json",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
EXTENSIONS = {
    "pdf": "pdf",
    "txt": "text",
    "text": "text",
    "log": "text",
    "md": "markdown",
    "markdown": "markdown",
    "csv": "csv",
    "json": "json",
    "html": "html",
    "htm": "html",
    "xhtml": "html",
}
UNICODE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")  # UTF-16 / UTF-32 text (NUL bytes, yet text)
_DATA_URL = re.compile(r"data:(?P<media>[^;,]*)(?P<params>(;[^;,]*)*),", re.IGNORECASE)


def file_name(part: FilePart, index: int) -> str:
    """The caller's filename, else the URL's last path segment, else `file-<n>` (1-based, in request order)."""
    if part.filename:
        return part.filename
    if part.file_url:
        try:
            path = urlsplit(part.file_url).path
        except ValueError:  # not a URL (e.g. "http://[bad"): its fetch is refused with the file's name
            path = ""
        tail = unquote(path.rsplit("/", 1)[-1])
        if tail:
            return tail[:200]
    return f"file-{index}"


def file_load(part: FilePart, *, name: str, fetch_deadline: float | None = None) -> LoadedFile:
    """The part's bytes; a file_url is fetched within what is left until `fetch_deadline` (time.monotonic())."""
    if part.file_data:
        data, media = _decode(part.file_data, name)
    elif part.file_url:
        data, media = _fetch(part.file_url, name, fetch_deadline)
    else:  # file_id: a provider's stored file; this gateway stores none and cannot read it
        raise FileRefused(name, "a file_id cannot be parsed (this gateway stores no files): send file_data or file_url")
    if not data:
        raise FileRefused(name, "the file is empty")
    return LoadedFile(name=name, data=data, kind=_kind(data, media, name), hash=hashlib.sha256(data).hexdigest())


def _decode(file_data: str, name: str) -> tuple[bytes, str]:
    media, payload = "", file_data
    match = _DATA_URL.match(file_data)
    if match:
        media, payload = match.group("media").lower(), file_data[match.end() :]
        if ";base64" not in match.group("params").lower():
            raise FileRefused(name, "file_data must be base64 (a data: URL with ;base64)")
    if len(payload) * 3 // 4 > MAX_FILE_BYTES + 3:
        raise FileRefused(name, f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        return base64.b64decode("".join(payload.split()), validate=True), media
    except (binascii.Error, ValueError):
        raise FileRefused(name, "file_data is not valid base64") from None


def _fetch(url: str, name: str, deadline: float | None) -> tuple[bytes, str]:
    timeouts = FETCH_TIMEOUTS
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FileRefused(name, MSG_FETCH_LATE.format(seconds=FETCH_SECONDS))
        timeouts = http.Timeouts(
            connect=min(timeouts.connect, left), read=min(timeouts.read, left), total=min(timeouts.total or left, left)
        )
    try:
        response = http.request("GET", url, headers={}, timeouts=timeouts, max_body=MAX_FILE_BYTES)
    except http.ConnectionRefused:
        raise FileRefused(name, "file_url is refused: its destination is not a public address") from None
    except http.ResponseTooLarge:
        raise FileRefused(name, f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB") from None
    except http.TransportError as error:
        if deadline is not None and time.monotonic() >= deadline:
            raise FileRefused(name, MSG_FETCH_LATE.format(seconds=FETCH_SECONDS)) from None
        raise FileRefused(name, f"file_url could not be fetched ({error.kind})") from None
    if 300 <= response.status_code < 400:
        raise FileRefused(name, f"file_url answered a redirect ({response.status_code}), which is not followed")
    if response.status_code != 200:
        raise FileRefused(name, f"file_url answered HTTP {response.status_code}")
    return response.content, response.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _kind(data: bytes, media: str, name: str) -> str:
    if data[:1024].lstrip().startswith(b"%PDF-") or media == "application/pdf":
        return "pdf"
    kind = MEDIA_TYPES.get(media) or EXTENSIONS.get(name.rsplit(".", 1)[-1].lower() if "." in name else "")
    if kind is None and (media in ("", "application/octet-stream") or media.startswith("text/")):
        kind = "text" if b"\x00" not in data[:8192] or data.startswith(UNICODE_BOMS) else None
    if kind is None:
        raise FileRefused(
            name, f"unsupported file type ({media or 'unknown'}): PDF, text, Markdown, CSV, JSON or HTML are read"
        )
    return kind
