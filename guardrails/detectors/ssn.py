"""The `ssn` builtin: a dashed or spaced 3-2-4 number in the ranges the SSA issues."""

from __future__ import annotations

from collections.abc import Iterable

from guardrails.detectors.base import Builtin, Span


def _ssn_is_issuable(area: str, group: str, serial: str) -> bool:
    """SSA rules: area 000, 666 and 900-999, group 00 and serial 0000 are never issued."""
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _confirm_ssn(text: str, start: int, end: int) -> Iterable[Span]:
    """A dashed or spaced 3-2-4 number with one separator kind, in the issuable ranges."""
    candidate = text[start:end]
    separator = candidate[3]
    if candidate[6] == separator and _ssn_is_issuable(candidate[:3], candidate[4:6], candidate[7:]):
        yield start, end


SSN = Builtin("ssn", r"\b\d{3}[- ]\d{2}[- ]\d{4}\b", _confirm_ssn, ("re2",))
