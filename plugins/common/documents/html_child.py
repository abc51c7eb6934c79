"""HTML files are reduced to their main text by trafilatura in a child process (plugins.common.documents.sandbox): lxml
and trafilatura take ~11 s per MB of ordinary paragraphs, which no worker thread can be interrupted in. This module
imports no Django: the sandbox's children load it alone; trafilatura is imported in the child (the forkserver
preloads it), so a worker that only names this function does not carry it."""

from __future__ import annotations

import resource
from multiprocessing.connection import Connection


def html_child_main(sender: Connection[tuple[str, str], object], html: str, seconds: float, memory_bytes: int) -> None:
    """A sandbox child: limit itself, extract, send ("text", text) ("" when nothing readable was found)."""
    with open("/proc/self/statm") as statm:  # Linux: the address space now, in pages
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + memory_bytes, size + memory_bytes))
    cpu = max(int(seconds), 0) + 2  # a backstop: the parent kills the child at the budget's end
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    import trafilatura

    try:
        extracted = trafilatura.extract(html, include_tables=True, include_comments=False, favor_recall=True)
        if not extracted:
            extracted = trafilatura.html2txt(html) or ""
        outcome = ("text", extracted)
    except MemoryError:
        outcome = ("refused", "the HTML file needs more memory than a file may use to be read")
    sender.send(outcome)
    sender.close()
