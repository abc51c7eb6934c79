"""The text of a file that goes to the provider as it is (the model reads it there, the file-parser did not turn it
into text): the guardrails' second pass scans it like any other text the model receives.

Only a file whose bytes are in the request and are text is read: a `data:` URL (or bare base64) whose media type is
text (text/*, JSON, XML, YAML, CSV; an unnamed type by the file name's extension), in UTF-8. Anything else (a PDF,
an image, a URL the provider fetches, a provider's file id, another encoding) cannot be read here: None.
"""

import base64
import binascii
from collections.abc import Callable
from urllib.parse import quote, unquote_to_bytes

from routing.canonical import FilePart

TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/csv",
        "application/javascript",
    }
)
TEXT_EXTENSIONS = frozenset(
    {"txt", "text", "md", "markdown", "csv", "tsv", "json", "jsonl", "html", "htm", "xml", "yaml", "yml", "log"}
)


def file_text(part: FilePart) -> tuple[str, Callable[[str], str]] | None:
    """The file's text and how to write a changed text back into `file_data` (the same media type and encoding),
    or None when its text cannot be read here."""
    data = part.file_data
    if not data or part.file_url or part.file_id:
        return None
    header, base64_encoded, payload = "", True, data
    if data.startswith("data:"):
        header, comma, payload = data.partition(",")
        if not comma:
            return None
        params = [param.strip().lower() for param in header[len("data:") :].split(";")]
        media, base64_encoded = params[0], "base64" in params[1:]
        if not _textual(media, part.filename):
            return None
    elif not _textual("", part.filename):
        return None
    try:
        raw = base64.b64decode(payload) if base64_encoded else unquote_to_bytes(payload)
        text = raw.decode("utf-8-sig")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None

    def encode(new: str) -> str:
        body = base64.b64encode(new.encode()).decode() if base64_encoded else quote(new)
        return f"{header},{body}" if header else body

    return text, encode


def _textual(media: str, filename: str | None) -> bool:
    if media.startswith("text/") or media in TEXT_MEDIA_TYPES or media.endswith(("+json", "+xml")):
        return True
    if media not in ("", "application/octet-stream"):
        return False
    extension = filename.rsplit(".", 1)[-1].lower() if filename and "." in filename else ""
    return extension in TEXT_EXTENSIONS
