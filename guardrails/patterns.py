"""A user's filter pattern: what RE2 accepts of it, checked when a guardrail is created (a 400 saying why).

Every pattern runs on RE2 (google-re2): its matching time is linear in the input whatever the pattern, so no
filter can hang a worker (no backtracking, so no ReDoS).
"""

from __future__ import annotations

import re2

# A pattern's length bound: RE2's program grows with the pattern, and every policy compiles its patterns into one
# combined program too; 4,096 characters is far beyond any real filter and keeps each program small.
MAX_PATTERN_CHARS = 4096
# RE2's memory budget for one compiled pattern (its DFA cache included); a pattern whose program does not fit is
# refused by `pattern_problem` ("pattern too large").
PATTERN_MAX_MEM = 8 << 20


def re2_options(max_mem: int) -> re2.Options:
    """RE2 options for our programs: UTF-8 text, a memory bound, and no stderr noise for refused patterns."""
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    return options


# Where an empty match would show: what decides one is only the characters on either side (none, word, space,
# newline), and these texts hold every such pair.
_EMPTY_PROBES = (b"", b"a", b" ", b"\n", b"a a", b"a\nb", b" \n ", b"aa\n\n  ")


def re2_reason(exc: re2.error) -> str:
    """RE2's message for a refused pattern (the binding hands it over as bytes)."""
    reason = exc.args[0] if exc.args else exc
    return reason.decode("utf-8", errors="replace") if isinstance(reason, bytes) else str(reason)


def pattern_problem(pattern: str) -> str | None:
    """Why a user's filter pattern cannot be used (None when it can): checked at creation, shown as a 400.

    RE2 refuses what it cannot run in linear time (backreferences, lookarounds) and programs over the memory
    bound; a pattern that can match empty text (`a*`, `\\b`) would match anywhere, which no filter means.
    """
    if not isinstance(pattern, str) or not pattern:
        return "the pattern must be a non-empty string"
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are allowed"
    try:
        compiled = re2.compile(pattern.encode(), re2_options(PATTERN_MAX_MEM))
    except re2.error as exc:
        return f"not a valid RE2 regular expression: {re2_reason(exc)}"
    if any(found.start() == found.end() for probe in _EMPTY_PROBES for found in compiled.finditer(probe)):
        return "the pattern can match empty text (an optional part or anchors alone), so it would match anywhere"
    return None
