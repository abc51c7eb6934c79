"""The `phone` builtin: RE2 candidates in the shapes numbers are written in, confirmed by libphonenumber."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import phonenumbers
from django.conf import settings

from guardrails.detectors.base import Builtin, Span

# libphonenumber is costly per candidate (benchmarks/RESULTS.md): past this many candidates in one text, the rest
# count as found unchecked (guardrails.policy).
MAX_PHONE_CHECKS = 20

# libphonenumber's matcher looks at the characters around a number (a letter glued to it means it is not one).
_PHONE_CONTEXT = 8

# Where libphonenumber is asked (costly per call, so the candidates must be few): the international form
# (+country code) of every country, and the national forms NANP (650-253-0000, (650) 253-0000, 6502530000) and
# trunk-prefix-0 (020 7946 0958, 01 23 45 67 89, 030 1234567). Dates, times and plain counters are not candidates.
_PHONE_CANDIDATES = (
    r"\+\d[\d ().\-]{5,20}\d"
    r"|\(\d{2,5}\)[ .\-]?\d{2,5}(?:[ .\-]?\d{2,5}){0,3}\b"
    r"|\b\d{3}[ .\-]\d{3}[ .\-]\d{4}\b"
    r"|\b0\d(?:[ .\-]\d{2}){4}\b"
    r"|\b0\d{2,4}[ \-/]\d{3,8}(?:[ \-]\d{2,4})?\b"
    r"|\b\d{10,11}\b"
)


def _phone_region() -> str:
    """The region whose national formats are read without a leading +country code (ISO 3166 alpha-2)."""
    return str(getattr(settings, "GUARDRAILS_PHONE_REGION", "US") or "US")


def _confirm_phone(text: str, start: int, end: int) -> Iterable[Span]:
    """Numbers that libphonenumber's matcher finds, and holds valid, in and around a candidate.

    A candidate in national form (no +country code) that is no valid number of the region is dropped first: that
    check is cheaper than the matcher, and digit runs in logs and ids are mostly such candidates.
    """
    if not text.startswith("+", start) and not _valid_national(text[start:end], _phone_region()):
        return
    offset = max(0, start - _PHONE_CONTEXT)
    for found_start, found_end in _phone_numbers_in(text[offset : end + _PHONE_CONTEXT], _phone_region()):
        if found_start < end - offset and found_end > start - offset:
            yield offset + found_start, offset + found_end


@functools.lru_cache(maxsize=4096)
def _phone_numbers_in(window: str, region: str) -> tuple[Span, ...]:
    """The matcher's findings in a small window, cached: the matcher is costly, and a conversation sends the same
    earlier messages again on every turn."""
    matcher = phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID)
    return tuple((found.start, found.end) for found in matcher)


@functools.lru_cache(maxsize=4096)
def _valid_national(candidate: str, region: str) -> bool:
    try:
        number = phonenumbers.parse(candidate, region)
    except phonenumbers.NumberParseException:
        return False
    return bool(phonenumbers.is_valid_number_for_region(number, region))


PHONE = Builtin("phone", _PHONE_CANDIDATES, _confirm_phone, ("re2", "phonenumbers"), MAX_PHONE_CHECKS)
