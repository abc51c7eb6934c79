"""What a builtin detector is: an RE2 candidate pattern, then a confirmation by the library that knows the format."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

Span = tuple[int, int]
Confirm = Callable[[str, int, int], Iterable[Span]]

# Every character past ASCII, as an RE2 class range.
NON_ASCII = r"\x{80}-\x{10FFFF}"


def confirm_as_is(text: str, start: int, end: int) -> Iterable[Span]:
    """The candidate pattern alone decides (email, the prompt-injection phrases, a user's pattern)."""
    return ((start, end),)


@dataclass(frozen=True, slots=True)
class Builtin:
    """A builtin detector: its RE2 candidate pattern, the confirmation step, and the engines it uses."""

    slug: str
    candidate: str
    confirm: Confirm
    engines: tuple[str, ...]
    max_checks: int | None = None
