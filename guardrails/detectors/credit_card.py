"""The `credit-card` builtin: 13-19 digits of a major network's range whose Luhn checksum holds."""

from __future__ import annotations

from collections.abc import Iterable

from guardrails.detectors.base import Builtin, Span


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) checksum of card numbers (ISO/IEC 7812-1)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _confirm_card(text: str, start: int, end: int) -> Iterable[Span]:
    """13-19 digits of a major network's range (first digit 2-6) whose Luhn checksum holds."""
    digits = "".join(char for char in text[start:end] if char.isdigit())
    if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
        yield start, end


CREDIT_CARD = Builtin("credit-card", r"\b\d(?:[ -]?\d){12,18}\b", _confirm_card, ("re2", "luhn"))
