"""The text-layer PDF engine (pypdf). It runs in a child process (plugins.common.documents.sandbox: memory, CPU and
wall-clock limits) and is bounded in itself too: the page count is checked before any page is read, pypdf's own
decompression, parsing and page-tree limits are tightened (a deflate bomb or a content stream of millions of
operators stops at the limit), the text is capped, and the time budget is checked between pages. pypdf never
calls an external decoder here (jbig2dec is switched off). This module imports no Django: the sandbox's
children load it alone.

Pages without a text layer (scans) can be read by the OCR engine (plugins.file_parser.ocr): their embedded images are
collected as data: URLs a vision model accepts (JPEG as it is; 8-bit grey or RGB samples as PNG).

pypdf is imported where a PDF is read (in the child; the sandbox preloads it there): a worker that only
names this module's types does not carry it (~6 MB per process)."""

from __future__ import annotations

import base64
import io
import resource
import struct
import time
import zlib
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pypdf

MAX_IMAGES_PER_PAGE = 8  # forwarded to the OCR engine per page
MAX_IMAGE_PIXELS = 25_000_000
MAX_IMAGE_BYTES = 8 * 1024 * 1024
LIMITS: dict[str, Any] = {  # pypdf.Configuration, for the duration of one read (a context variable: this thread only)
    "zlib_maximum_output_length": 16_000_000,
    "lzw_maximum_output_length": 16_000_000,
    "run_length_maximum_output_length": 16_000_000,
    "jbig2_maximum_output_length": 16_000_000,
    "brotli_maximum_output_length": 16_000_000,
    "array_based_stream_maximum_output_length": 16_000_000,
    "maximum_declared_stream_length": 32_000_000,
    "image_maximum_buffer_size": 32_000_000,
    "stream_decoding_work_maximum_length": 64_000_000,
    "stream_parsing_work_maximum_count": 100_000,  # a dense page uses a few thousand; 100,000 take pypdf ~1.5 s
    "array_maximum_element_count": 50_000,
    "dictionary_maximum_element_count": 50_000,
    "page_tree_maximum_entries": 10_000,
    "page_tree_maximum_page_entries": 200_000,
    "xform_maximum_invocations_per_extraction": 500,
    "outline_maximum_entries": 10_000,
    "named_destinations_maximum_entries": 10_000,
    "form_fields_maximum_entries": 10_000,
    "jbig2dec_binary": None,  # never run an external program on a caller's bytes
}


@dataclass(frozen=True)
class PdfPage:
    number: int  # 1-based
    text: str
    images: tuple[str, ...] = ()  # data: URLs (collected only for pages without text, when OCR may read them)


@dataclass(frozen=True)
class PdfLimits:
    max_pages: int
    max_text_chars: int
    seconds: float  # the time left in the request's parsing budget
    memory_bytes: int  # address space the child may add to what it starts with


class PdfProblem(Exception):
    """Why the PDF is refused (said to the caller with the file's name)."""


class OutOfTime(Exception):
    """The request's parsing budget ran out."""


def read_pages(data: bytes, *, images: bool, limits: PdfLimits) -> tuple[PdfPage, ...]:
    """The PDF's pages as text (and, with `images`, the images of pages without text). PdfProblem when the file
    is encrypted, corrupt, has too many pages or too much text; OutOfTime past the budget."""
    import pypdf

    deadline = time.monotonic() + limits.seconds
    with pypdf.apply_configuration(**LIMITS):
        reader = _open(data)
        pages = []
        chars = 0
        for number in range(1, _page_count(reader, limits.max_pages) + 1):
            if time.monotonic() > deadline:
                raise OutOfTime()
            page = _page(reader, number, images=images)
            chars += len(page.text)
            if chars > limits.max_text_chars:
                raise PdfProblem(f"more than {limits.max_text_chars:,} characters of text")
            pages.append(page)
    return tuple(pages)


def child_main(
    sender: Connection[tuple[str, tuple[PdfPage, ...] | str], object], data: bytes, images: bool, limits: PdfLimits
) -> None:
    """A sandbox child: limit itself, read, send ("pages", pages) | ("refused", why) | ("late", "")."""
    _limit_self(limits)
    try:
        outcome: tuple[str, tuple[PdfPage, ...] | str] = ("pages", read_pages(data, images=images, limits=limits))
    except PdfProblem as problem:
        outcome = ("refused", str(problem))
    except OutOfTime:
        outcome = ("late", "")
    except MemoryError:
        outcome = ("refused", "the PDF needs more memory than a file may use to be read")
    sender.send(outcome)
    sender.close()


def _limit_self(limits: PdfLimits) -> None:
    with open("/proc/self/statm") as statm:  # Linux: the address space now, in pages
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + limits.memory_bytes, size + limits.memory_bytes))
    cpu = max(int(limits.seconds), 0) + 2  # a backstop: the parent kills the child at the budget's end
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _open(data: bytes) -> pypdf.PdfReader:
    import pypdf

    try:
        reader = pypdf.PdfReader(
            io.BytesIO(data), strict=False, root_object_recovery_limit=1_000, xref_stream_maximum_entries=200_000
        )
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password only still opens with ""
            raise PdfProblem("the PDF is encrypted (password-protected); send it decrypted")
        return reader
    except (PdfProblem, MemoryError):
        raise
    except Exception:  # pypdf raises many kinds on broken or hostile input (limits included)
        raise PdfProblem("the PDF is corrupt or unreadable") from None


def _page_count(reader: pypdf.PdfReader, max_pages: int) -> int:
    try:
        count = len(reader.pages)
    except MemoryError:
        raise
    except Exception:
        raise PdfProblem("the PDF is corrupt or unreadable (its page tree)") from None
    if count > max_pages:
        raise PdfProblem(f"the PDF has {count} pages; at most {max_pages} are read")
    if count == 0:
        raise PdfProblem("the PDF has no pages")
    return count


def _page(reader: pypdf.PdfReader, number: int, *, images: bool) -> PdfPage:
    try:
        page = reader.pages[number - 1]
        text = (page.extract_text() or "").strip()
        if not text:  # pypdf's text extraction swallows a limit reached while decompressing: ask once more
            page.get_contents()
        found = _images(page) if images and not text else ()
    except MemoryError:
        raise
    except Exception:
        raise PdfProblem(f"page {number} of the PDF is corrupt or beyond the parsing limits") from None
    return PdfPage(number=number, text=text, images=found)


def _images(page: pypdf.PageObject) -> tuple[str, ...]:
    from pypdf.generic import IndirectObject

    resources: Any = page.get("/Resources")
    resources = resources.get_object() if isinstance(resources, IndirectObject) else resources
    xobjects: Any = (resources or {}).get("/XObject")
    xobjects = xobjects.get_object() if xobjects is not None else {}
    found: list[str] = []
    for ref in list(xobjects.values())[: MAX_IMAGES_PER_PAGE * 4]:
        xobject = ref.get_object()
        if xobject.get("/Subtype") == "/Image" and (url := _image_url(xobject)):
            found.append(url)
            if len(found) == MAX_IMAGES_PER_PAGE:
                break
    return tuple(found)


def _image_url(xobject: pypdf.generic.StreamObject) -> str | None:
    """A data: URL a vision model reads, or None for an image kind we cannot send without a converter (CCITT,
    JBIG2, JPEG 2000, 16-bit, indexed or CMYK colour): that page then has nothing to read."""
    width, height = int(xobject.get("/Width", 0)), int(xobject.get("/Height", 0))
    if not 0 < width * height <= MAX_IMAGE_PIXELS:
        return None
    filters = xobject.get("/Filter")
    filters = [filters] if isinstance(filters, str) else list(filters or [])
    if filters == ["/DCTDecode"]:
        data = xobject._data  # JPEG bytes as stored (pypdf would need Pillow to hand them over)
        return _data_url("image/jpeg", data) if len(data) <= MAX_IMAGE_BYTES else None
    if set(filters) - {"/FlateDecode"} or xobject.get("/BitsPerComponent") != 8:
        return None
    channels = _channels(xobject.get("/ColorSpace"))
    if channels is None or width * height * channels > MAX_IMAGE_BYTES * 4:
        return None
    samples = xobject.get_data()
    if len(samples) < width * height * channels:
        return None
    return _data_url("image/png", _png(width, height, channels, samples))


def _channels(space: pypdf.generic.PdfObject | None) -> int | None:
    from pypdf.generic import IndirectObject

    space = space.get_object() if isinstance(space, IndirectObject) else space
    if isinstance(space, list) and len(space) == 2 and space[0] == "/ICCBased":  # scanners' usual colour space
        count = space[1].get_object().get("/N")
        return count if count in (1, 3) else None
    return {"/DeviceGray": 1, "/DeviceRGB": 3}.get(str(space))


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _png(width: int, height: int, channels: int, samples: bytes) -> bytes:
    stride = width * channels
    rows = b"".join(b"\x00" + samples[y * stride : (y + 1) * stride] for y in range(height))

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0 if channels == 1 else 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")
