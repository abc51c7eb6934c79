"""The text the content filters match on, and the way back to the caller's text.

Filters match on a folded view of each text, so that look-alike spellings cannot slip a blocked word through:
- default-ignorable code points are dropped: zero-width space/joiners (U+200B..U+200D), word joiner (U+2060),
  the byte-order mark (U+FEFF), the soft hyphen (U+00AD), bidi controls, variation selectors, tag characters
  (Unicode's Default_Ignorable_Code_Point set, DerivedCoreProperties.txt);
- each remaining character is replaced by its NFKC form: fullwidth and halfwidth forms, ligatures, math
  alphanumerics, circled and superscript digits become the plain characters (`ｐａｓｓ` -> `pass`, `ﬁ` -> `fi`).
Block, flag and redact still act on the caller's text: `TextView.original` maps a span of the view back to the
span of the original characters that produced it, ignorables inside the span included, so a redaction covers
everything that spelled the match.

Cost: an ASCII text is its own view (no work); other text is checked in C (`unicodedata.is_normalized` and one
RE2 pass for ignorables) and is its own view when nothing folds. A text that does fold is checked the same way
in stretches of STRETCH characters, and only the stretches with something to fold pay a step per character
(C-level passes, but a Python object each: about 0.1-0.2 us a character, so 20 kB of look-alikes cost ms).
"""

from __future__ import annotations

import bisect
import itertools
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import re2

# Default_Ignorable_Code_Point (Unicode 15.1 DerivedCoreProperties.txt), unassigned ones included.
IGNORABLE_CLASS = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_IGNORABLE = re2.compile(f"[{IGNORABLE_CLASS}]".encode())
_FOLD_CACHE_MAX = 65536


@dataclass(frozen=True, slots=True)
class TextView:
    """`text` is what the filters see; `original` maps its spans back. Without `_pieces`, the view has the
    original's offsets. Else the view is the concatenation of `_pieces`, piece k standing for `_lengths[k]`
    original characters: a stretch that does not fold (the same characters), or one character's folded form
    (empty for an ignorable, several characters for an expansion). Where each piece ends, in the view and in the
    original, is summed up when a span is first mapped: most texts have nothing to map."""

    text: str
    _pieces: list[str] | None = None
    _lengths: list[int] = field(default_factory=list)
    _ends: list[list[int]] = field(default_factory=list)  # [view ends, original ends], once computed

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original span whose characters produced view[start:end] (end > start)."""
        if self._pieces is None:
            return start, end
        return self._at(start, first=True), self._at(end - 1, first=False)

    def _at(self, offset: int, *, first: bool) -> int:
        """The original offset of the view character at `offset`: where it starts (`first`) or ends."""
        if not self._ends:
            assert self._pieces is not None
            self._ends.append(list(itertools.accumulate(map(len, self._pieces))))
            self._ends.append(list(itertools.accumulate(self._lengths)))
        view_ends, orig_ends = self._ends
        index = bisect.bisect_right(view_ends, offset)  # the piece holding it (empty pieces are passed over)
        view_start = view_ends[index - 1] if index else 0
        orig_start = orig_ends[index - 1] if index else 0
        if view_ends[index] - view_start == self._lengths[index]:  # the same characters
            return orig_start + (offset - view_start) + (0 if first else 1)
        return orig_start if first else orig_ends[index]  # an expansion: the whole original character


_folds: dict[str, str] = {}


def _fold(char: str) -> str:
    folded = _folds.get(char)
    if folded is None:
        folded = "" if _IGNORABLE.search(char.encode()) else unicodedata.normalize("NFKC", char)
        if len(_folds) < _FOLD_CACHE_MAX:
            _folds[char] = folded
    return folded


_UNANCHORED = re2._Anchor.UNANCHORED  # type: ignore[attr-defined]  # the binding's stubs leave it out


def first_span(regexp: Any, data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """The first match's byte span in data[start:end] (the whole of `data` is the context of \\b, ^ and $).

    It calls the binding's compiled program directly: the public `search` wraps each call in a generator and a
    match object, which cost twice RE2's own work on a short window, and a scan makes dozens of these calls.
    """
    span = regexp._regexp.Match(_UNANCHORED, data, start, end)[0]
    return None if span[0] < 0 else span


# The stretch of text checked at once for anything to fold: a stretch that has something is folded character by
# character (in C-level passes: `_fold_stretch`), so a few look-alike characters cost a few stretches.
STRETCH = 256


def text_view(text: str, data: bytes | None = None) -> TextView:
    """The folded view of `text` (`data`: its UTF-8 encoding, when the caller has it)."""
    if text.isascii():
        return TextView(text)
    data = text.encode() if data is None else data
    if unicodedata.is_normalized("NFKC", text) and _IGNORABLE.search(data) is None:
        return TextView(text)
    pieces: list[str] = []
    lengths: list[int] = []
    for offset in range(0, len(text), STRETCH):
        stretch = text[offset : offset + STRETCH]
        if stretch.isascii() or (
            unicodedata.is_normalized("NFKC", stretch) and _IGNORABLE.search(stretch.encode()) is None
        ):
            pieces.append(stretch)
            lengths.append(len(stretch))
        else:
            folded = _fold_stretch(stretch)
            pieces.extend(folded)
            lengths.extend(itertools.repeat(1, len(folded)))
    return TextView("".join(pieces), pieces, lengths)


def _fold_stretch(stretch: str) -> list[str]:
    """Each character's folded form, through a table of the distinct characters."""
    table = {char: _fold(char) for char in set(stretch) if char >= "\x80"}
    return list(map(table.get, stretch, stretch))
