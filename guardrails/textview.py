"""The text the content filters match on, and the way back to the caller's text.

Filters match on a folded view of each text, so that look-alike spellings cannot slip a blocked word through:
- default-ignorable code points are dropped: zero-width space/joiners (U+200B..U+200D), word joiner (U+2060),
  the byte-order mark (U+FEFF), the soft hyphen (U+00AD), bidi controls, variation selectors, tag characters
  (Unicode's Default_Ignorable_Code_Point set, DerivedCoreProperties.txt);
- the rest is put in NFKC form: fullwidth and halfwidth forms, ligatures, math alphanumerics, circled and
  superscript digits become the plain characters (`ｐａｓｓ` -> `pass`, `ﬁ` -> `fi`), and a letter followed by a
  combining accent becomes the accented letter.
- and, in a second view scanned only when the text holds them, letters of other scripts that look like Latin ones
  become those (Cyrillic `а е о р с у х ѕ і ј` and capitals, Greek capitals and `ο ν ι ρ γ`, a few Armenian and
  Latin ones such as dotless `ı`: `CONFUSABLES`, from Unicode's confusables.txt): `АСМЕ` in Cyrillic is `ACME`. The
  first view stays, so a pattern written in Cyrillic still matches Cyrillic text (`text_views`).
Block, flag and redact still act on the caller's text: `TextView.original` maps a span of the view back to the
span of the original characters that produced it, ignorables inside the span included, so a redaction covers
everything that spelled the match. Where NFKC composed characters (a letter and its combining accent), the
characters of that stretch cannot be told apart in the view: a span there maps to the whole stretch (at most
STRETCH characters; a redaction then takes more than the match, never less).

Cost: an ASCII text is its own view (no work); other text is checked in C (`unicodedata.is_normalized` and one
RE2 pass for ignorables) and is its own view when nothing folds. A text that does fold is folded in stretches
of STRETCH characters, each in C (a regular expression drops the ignorables, `unicodedata.normalize` does the
rest; cost: benchmarks/RESULTS.md). Aligning a folded
stretch character by character, to map a span back, happens only for the stretches that hold a match.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import re2

from guardrails.pacing import scan_pace

# Default_Ignorable_Code_Point (Unicode 15.1 DerivedCoreProperties.txt), unassigned ones included.
IGNORABLE_CLASS = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_IGNORABLE = re2.compile(f"[{IGNORABLE_CLASS}]".encode())
_IGNORABLES = re.compile(f"[{IGNORABLE_CLASS}]+")  # on str, to drop them in C
_FOLD_CACHE_MAX = 65536

# Letters of other scripts drawn like a Latin one (Unicode confusables.txt, one character to one character, so a
# folded stretch keeps its alignment): the common ones a caller can spell a Latin word with.
CONFUSABLES = {
    # Cyrillic
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y",
    "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ү": "Y", "Ԛ": "Q", "Ԝ": "W", "Ӏ": "I",
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d",
    "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ү": "y",
    # Greek
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X", "ο": "o", "ν": "v", "ι": "i", "ρ": "p", "γ": "y", "α": "a",
    # Armenian, Latin
    "օ": "o", "ս": "u", "հ": "h", "ո": "n", "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ʏ": "y",
}  # fmt: skip
# A list indexed by code point (past its end, IndexError, a LookupError: str.translate keeps the character): twice
# as fast as a dict.
_CONFUSABLE_TABLE = [CONFUSABLES.get(chr(code), chr(code)) for code in range(max(map(ord, CONFUSABLES)) + 1)]
_CONFUSABLE = re2.compile(f"[{''.join(CONFUSABLES)}]".encode())


@dataclass(frozen=True, slots=True)
class TextView:
    """`text` is what the filters see; `original` maps its spans back. Without `_pieces`, the view has the
    original's offsets. Else the view is the concatenation of `_pieces`, piece k being the view of the original's
    stretch k (characters [k * STRETCH, (k + 1) * STRETCH)), the same characters when `_folded[k]` is false.
    Where each piece ends in the view is summed up, and a folded stretch aligned character by character, only
    when a span is first mapped there: most texts have nothing to map."""

    text: str
    original_text: str = ""
    _pieces: list[str] | None = None
    _confusables: bool = False  # look-alike letters folded too (the second view)
    _folded: list[bool] = field(default_factory=list)
    _view_ends: list[int] = field(default_factory=list)
    _aligned: dict[int, list[int] | None] = field(default_factory=dict)

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original span whose characters produced view[start:end] (end > start)."""
        if self._pieces is None:
            return start, end
        return self._at(start, first=True), self._at(end - 1, first=False)

    def _at(self, offset: int, *, first: bool) -> int:
        """The original offset of the view character at `offset`: where it starts (`first`) or ends."""
        assert self._pieces is not None
        if not self._view_ends:
            self._view_ends.extend(itertools.accumulate(map(len, self._pieces)))
        index = bisect.bisect_right(self._view_ends, offset)  # the piece holding it (empty pieces are passed over)
        local = offset - (self._view_ends[index - 1] if index else 0)
        base = index * STRETCH
        if not self._folded[index]:
            return base + local + (0 if first else 1)
        ends = self._alignment(index)
        if ends is None:  # the stretch's view is not its characters' folds side by side: all of the stretch
            return base if first else min(base + STRETCH, len(self.original_text))
        at = bisect.bisect_right(ends, local)  # the character whose folded form holds it
        return base + at + (0 if first else 1)

    def _alignment(self, index: int) -> list[int] | None:
        """Where each character of folded stretch `index` ends in its piece; None when the piece is not simply
        their folds in a row (NFKC composed characters across them, such as a letter and a combining accent)."""
        if index not in self._aligned:
            assert self._pieces is not None
            stretch = self.original_text[index * STRETCH : (index + 1) * STRETCH]
            folds = _fold_stretch(stretch)
            if self._confusables:
                folds = [fold.translate(_CONFUSABLE_TABLE) for fold in folds]
            aligned = "".join(folds) == self._pieces[index]
            self._aligned[index] = list(itertools.accumulate(map(len, folds))) if aligned else None
        return self._aligned[index]


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


# The stretch of text folded at once (and the most a span maps to where NFKC composed characters).
STRETCH = 256


def text_views(text: str, data: bytes | None = None, limit: int | None = None) -> Iterator[tuple[TextView, bytes]]:
    """The views a scan matches on, each with its UTF-8 encoding: the folded view, and when that holds look-alike
    letters of other scripts, the same with them folded to the Latin ones (a pattern in either script then
    matches its own spelling, and a Latin one the look-alike spelling too). Most texts have one view. `limit`:
    see `text_view`."""
    data = text.encode() if data is None else data
    view = text_view(text, data, limit=limit)
    view_data = data if view.text is text else view.text.encode()
    yield view, view_data
    if not view_data.isascii() and _CONFUSABLE.search(view_data) is not None:
        # One character for one: a text that is its own view keeps its offsets (no stretches to map).
        latin = (
            TextView(text.translate(_CONFUSABLE_TABLE))
            if view.text is text
            else text_view(text, data, confusables=True, limit=limit)
        )
        yield latin, latin.text.encode()


class ViewTooLarge(Exception):
    """A folded view grew past the `limit` asked for: `size` is its UTF-8 bytes when folding stopped."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def text_view(text: str, data: bytes | None = None, *, confusables: bool = False, limit: int | None = None) -> TextView:
    """The folded view of `text` (`data`: its UTF-8 encoding, when the caller has it); `confusables`: look-alike
    letters folded too. Folding stops with ViewTooLarge once a folded view is over `limit` bytes."""
    if text.isascii():
        return TextView(text)
    data = text.encode() if data is None else data
    if not confusables and unicodedata.is_normalized("NFKC", text) and _IGNORABLE.search(data) is None:
        return TextView(text)
    pieces: list[str] = []
    folded: list[bool] = []
    size = 0
    for offset in range(0, len(text), STRETCH):
        stretch = text[offset : offset + STRETCH]
        view = stretch if stretch.isascii() else unicodedata.normalize("NFKC", _IGNORABLES.sub("", stretch))
        if confusables:
            view = view.translate(_CONFUSABLE_TABLE)
        pieces.append(view)
        folded.append(view != stretch)
        # NFKC can make text 11 times longer (U+FDFA: 3 bytes, 33 folded), and folding costs more than RE2 reading:
        # the fold counts its bytes for the scan's turns to other greenlets, and stops past the scan budget.
        grown = len(view) if view.isascii() else len(view.encode("utf-8", "surrogatepass"))
        size += grown
        scan_pace(grown)
        if limit is not None and size > limit:
            raise ViewTooLarge(size)
    return TextView("".join(pieces), text, _pieces=pieces, _folded=folded, _confusables=confusables)


def _fold_stretch(stretch: str) -> list[str]:
    """Each character's folded form, through a table of the distinct characters."""
    table = {char: _fold(char) for char in set(stretch) if char >= "\x80"}
    return list(map(table.get, stretch, stretch))
