"""PDFs (and HTML files, see plugins.common.documents.html_child) are read in a child process, so that a hostile one
cannot take the worker down: the child limits its own address space (MAX_PARSE_MEMORY more than it starts with: pypdf
keeps what it decoded, and a small file can decode to gigabytes within pypdf's per-stream limits) and CPU time, and
the parent kills it when the request's parsing budget runs out, whatever pypdf is doing. Children are forked by a
forkserver (started once per worker process, pypdf already imported), not from the worker itself: nothing of the
worker's threads, sockets or database connections is copied, and starting one costs milliseconds."""

import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plugins.common.documents.errors import FileRefused
from plugins.common.documents.html_child import html_child_main
from plugins.common.documents.loaded import LoadedFile
from plugins.common.documents.pdf import OutOfTime, PdfLimits, PdfPage, child_main

MAX_PDF_PAGES = 200
MAX_TEXT_CHARS = 2_000_000  # per file: past it the model could not read it anyway
MAX_PARSE_MEMORY = 512 * 1024 * 1024
MAX_CONCURRENT_READS = 4  # per worker process: reading is CPU-bound, and each child may use MAX_PARSE_MEMORY
MSG_CRASHED = "the file could not be read within the memory and CPU limits for one file"

_context = multiprocessing.get_context("forkserver")
# The children's modules, loaded once by the forkserver (response-healing's repairs are forked by it too).
_context.set_forkserver_preload(
    [
        "pypdf",
        "trafilatura",
        "json_repair",
        "plugins.common.documents.pdf",
        "plugins.common.documents.html_child",
        "plugins.common.repair_child",
    ]
)
_slots = threading.BoundedSemaphore(MAX_CONCURRENT_READS)


@dataclass(frozen=True)
class PdfRead:
    pages: tuple[PdfPage, ...]
    seconds: float


def pdf_read(file: LoadedFile, *, deadline: float, images: bool) -> PdfRead:
    """The PDF's pages (see plugins.common.documents.pdf.read_pages), read in a child. FileRefused naming the file when
    the PDF is refused or breaks the child's limits; OutOfTime when the budget ends first."""
    started = time.monotonic()

    def args(seconds: float) -> tuple[bytes, bool, PdfLimits]:
        limits = PdfLimits(
            max_pages=MAX_PDF_PAGES, max_text_chars=MAX_TEXT_CHARS, seconds=seconds, memory_bytes=MAX_PARSE_MEMORY
        )
        return (file.data, images, limits)

    pages = _in_child(file, child_main, args, deadline=deadline)
    return PdfRead(pages=pages, seconds=time.monotonic() - started)


def html_read(file: LoadedFile, html: str, *, deadline: float) -> str:
    """The main text of an HTML file (trafilatura), extracted in a child within the request's parsing budget."""
    return _in_child(file, html_child_main, lambda seconds: (html, seconds, MAX_PARSE_MEMORY), deadline=deadline)


def _in_child(
    file: LoadedFile, target: Callable[..., None], args: Callable[[float], tuple[object, ...]], *, deadline: float
) -> Any:  # what the target sends (unpickled): pdf_read's pages, html_read's text
    """What `target(sender, *args(seconds left))` sends back as ("pages" | "text", value), run in a child killed
    at the deadline. OutOfTime when the budget ends first (or the slots stay taken); FileRefused naming the file
    when the child refuses it or dies of a limit."""
    seconds = deadline - time.monotonic()
    if seconds <= 0:
        raise OutOfTime(file.name)
    if not _slots.acquire(timeout=seconds):  # others' files took the slots for the whole budget
        raise OutOfTime(file.name)
    try:
        seconds = deadline - time.monotonic()
        if seconds <= 0:
            raise OutOfTime(file.name)
        receiver, sender = _context.Pipe(duplex=False)
        child = _context.Process(target=target, args=(sender, *args(seconds)), daemon=True)
        try:
            child.start()
            sender.close()
            if not receiver.poll(seconds):
                raise OutOfTime(file.name)
            kind, value = receiver.recv()
        except EOFError:  # the child died without answering (killed by a limit)
            raise FileRefused(file.name, MSG_CRASHED) from None
        finally:
            sender.close()
            receiver.close()
            if child.is_alive():
                child.kill()
            child.join()
            child.close()
    finally:
        _slots.release()
    if kind == "late":
        raise OutOfTime(file.name)
    if kind == "refused":
        raise FileRefused(file.name, value)
    return value
