"""PDFs are read in a child process, so that a hostile one cannot take the worker down: the child limits its
own address space (MAX_PARSE_MEMORY more than it starts with: pypdf keeps what it decoded, and a small file can
decode to gigabytes within pypdf's per-stream limits) and CPU time, and the parent kills it when the request's
parsing budget runs out, whatever pypdf is doing. Children are forked by a forkserver (started once per worker
process, pypdf already imported), not from the worker itself: nothing of the worker's threads, sockets or
database connections is copied, and starting one costs milliseconds."""

import multiprocessing
import threading
import time
from dataclasses import dataclass

from plugins.files.errors import FileRefused
from plugins.files.pdf import OutOfTime, PdfLimits, PdfPage, child_main
from plugins.files.sources import LoadedFile

MAX_PDF_PAGES = 200
MAX_TEXT_CHARS = 2_000_000  # per file: past it the model could not read it anyway
MAX_PARSE_MEMORY = 512 * 1024 * 1024
MAX_CONCURRENT_READS = 4  # per worker process: reading is CPU-bound, and each child may use MAX_PARSE_MEMORY
MSG_CRASHED = "the PDF could not be read within the memory and CPU limits for one file"

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["plugins.files.pdf", "plugins.healing_child"])  # response-healing's too
_slots = threading.BoundedSemaphore(MAX_CONCURRENT_READS)


@dataclass(frozen=True)
class PdfRead:
    pages: tuple[PdfPage, ...]
    seconds: float


def pdf_read(file: LoadedFile, *, deadline: float, images: bool) -> PdfRead:
    """The PDF's pages (see plugins.files.pdf.read_pages), read in a child. FileRefused naming the file when
    the PDF is refused or breaks the child's limits; OutOfTime when the budget ends first."""
    started = time.monotonic()
    seconds = deadline - started
    if seconds <= 0:
        raise OutOfTime(file.name)
    if not _slots.acquire(timeout=seconds):  # others' PDFs took the slots for the whole budget
        raise OutOfTime(file.name)
    try:
        return _read_in_child(file, images=images, seconds=deadline - time.monotonic(), started=started)
    finally:
        _slots.release()


def _read_in_child(file: LoadedFile, *, images: bool, seconds: float, started: float) -> PdfRead:
    if seconds <= 0:
        raise OutOfTime(file.name)
    limits = PdfLimits(
        max_pages=MAX_PDF_PAGES, max_text_chars=MAX_TEXT_CHARS, seconds=seconds, memory_bytes=MAX_PARSE_MEMORY
    )
    receiver, sender = _context.Pipe(duplex=False)
    child = _context.Process(target=child_main, args=(sender, file.data, images, limits), daemon=True)
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
    if kind == "late":
        raise OutOfTime(file.name)
    if kind == "refused":
        raise FileRefused(file.name, value)
    return PdfRead(pages=value, seconds=time.monotonic() - started)
