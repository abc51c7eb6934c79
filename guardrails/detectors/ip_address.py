"""The `ip-address` builtin: IPv4 and IPv6 candidates on RE2, parsed by the stdlib `ipaddress`."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from guardrails.detectors.base import Builtin, Span

# IPv4 dotted quads, and IPv6 in full (eight groups) or compressed ("::") form, possibly ending in a dotted quad;
# "12:30:45" is not a candidate. The stdlib `ipaddress` decides.
_HEX = "[0-9A-Fa-f]{1,4}"
_QUAD = r"\d{1,3}(?:\.\d{1,3}){3}"
_IP_CANDIDATES = (
    rf"\b{_QUAD}\b"
    rf"|{_HEX}(?::{_HEX}){{7}}"
    rf"|(?:{_HEX}(?::{_HEX}){{0,6}})?::(?:(?:{_HEX}:){{0,6}}(?:{_QUAD}|{_HEX}))?"
)


def _glued(text: str, start: int, end: int) -> bool:
    """An address candidate that is part of a longer dotted or colon-separated token (a version, a path)."""
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    after_next = text[end + 1] if end + 1 < len(text) else ""
    return (
        before.isalnum() or before in ".:" or after.isalnum() or after == ":" or (after == "." and after_next.isalnum())
    )


def _confirm_ip(text: str, start: int, end: int) -> Iterable[Span]:
    """An IPv4 or IPv6 address that the stdlib parses, not glued to a longer token."""
    candidate = text[start:end]
    if ":" in candidate and sum(char.isalnum() for char in candidate) == 0:
        return
    if _glued(text, start, end):
        return
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        return
    yield start, end


IP_ADDRESS = Builtin("ip-address", _IP_CANDIDATES, _confirm_ip, ("re2", "ipaddress"))
