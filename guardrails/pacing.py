"""Where a guardrail scan gives the other greenlets of a gevent worker their turn (`scan_pace`): each
SCAN_YIELD_BYTES of work counted, between C calls that cannot be cut. Its own module because both the folding of
texts (guardrails.textview) and the RE2 calls (guardrails.scan, which imports textview) count their bytes."""

from __future__ import annotations

import sys

# How many bytes are read (RE2) or folded (NFKC) between two turns of the other greenlets: small enough that a
# turn comes every millisecond or two of CPU, even folding the text NFKC expands most (U+FDFA: 3 bytes to 33)
# (benchmarks/RESULTS.md).
SCAN_YIELD_BYTES = 64 * 1024

_unyielded = 0  # bytes counted since the last turn given; one counter per process (a gevent worker is one thread)


def scan_pace(read: int) -> None:
    """Count `read` bytes scanned; each SCAN_YIELD_BYTES, let the worker's other greenlets run (under gevent)."""
    global _unyielded
    _unyielded += read
    if _unyielded < SCAN_YIELD_BYTES:
        return
    _unyielded = 0
    if _under_gevent():
        import gevent  # imported only where gevent already runs the process

        gevent.sleep(0)


def _under_gevent() -> bool:
    """True in a gevent worker (gunicorn's gevent worker monkey-patches the process first). Elsewhere (a gthread
    worker, tests, management commands) nothing is done: `gevent.sleep` would create a hub in the thread."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("socket"))
