"""The RE2 scan under guardrails.policy: how much text a request's guardrails may scan (the budget), how their
patterns are combined into RE2 programs, where a scan gives other greenlets their turn, and the byte-level helpers.

- Budget (`scan_budget_check`): a request's guardrails scan at most GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL bytes
  (UTF-8) of text each, and GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST bytes in all (the bytes read times the passes:
  each guardrail whose filters scan the text, twice when the entity model is asked, and with several guardrails
  one more, their filters together for redactions).
  The bytes read are those of the folded views the filters match on (guardrails.textview: NFKC can make a text 11
  times longer), never fewer than the text's own. Over either: 413 naming the limit, before anything is scanned
  or sent, and folding stops as soon as a view is over. Never a truncated scan: text the filters did not read
  must not reach the model.
- Views (`views_of`): a text is folded once for all of a request's scans (the budget check, each guardrail, the
  entity model's pre-scan, the redaction pass), its views kept in a small bounded cache.
- Groups (`groups_for`): a guardrail's patterns are combined into as few programs as keep each program small, and
  the text is read once per group (a combined search, then an RE2::Set naming the patterns to locate), not once per
  pattern. Small matters: some patterns that are cheap alone (counted repetitions such as `.{0,1000}secret`) make a
  union whose automaton has too many states for its memory; an RE2::Set never falls back from its DFA to the NFA as
  a single program does, so it rebuilds states on nearly every byte, far slower than the patterns scanned each
  alone (benchmarks/RESULTS.md). A group's program stays under GROUP_MAX_PROGRAM instructions, so the usual
  filters and every builtin are still one group (one pass) while such patterns run in small groups.
- Yielding (guardrails.pacing.scan_pace): every RE2 call of a scan reports the bytes it read, and folding a text
  the bytes of view it built; each SCAN_YIELD_BYTES of them, under gevent (a monkey-patched worker), the scan lets
  the other greenlets of the worker run (`gevent.sleep(0)`). A
  call itself cannot be cut: one RE2 search runs to its end. The scan is split only where results cannot change:
  between texts (each text part is scanned on its own anyway), between groups, between the searches that list the
  windows where matches are, and between the passes that locate each pattern in them. Cutting one text into
  chunks would miss a match that crosses a cut (a pattern's matches have no length bound: `(?s)BEGIN.*END`), and
  overlapping chunks only help a pattern with a known longest match, which RE2 does not say.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import re2
from django.conf import settings

from gateway.errors import GatewayError
from guardrails import textview
from guardrails.pacing import scan_pace
from guardrails.textview import TextView, ViewTooLarge, first_span, text_views

MSG_SCAN_TOO_LARGE_GUARDRAIL = (
    "This request has at least {size} bytes of text for guardrail {name} to scan (folded views included, twice "
    "when an entity model is asked), and a guardrail scans at most {limit} (GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL): "
    "the request was refused, not sent partly unscanned"
)
MSG_SCAN_TOO_LARGE_REQUEST = (
    "This request has at least {size} bytes of text to scan (folded views included), read by each of its {count} "
    "guardrails (twice when an entity model is asked) and, with several, once more by their filters together: "
    "{total} in all, and a request's guardrails scan at most {limit} (GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST): the "
    "request was refused, not sent partly unscanned"
)

# A group's combined program, in RE2 instructions (`programsize`): large enough for the usual filters and every
# builtin together, small enough to leave out unions of counted repetitions (sizes: benchmarks/RESULTS.md).
GROUP_MAX_PROGRAM = 3000
# The combined programs of a group hold up to every filter of several guardrails at once.
COMBINED_MAX_MEM = 64 << 20


class ScanTooLarge(GatewayError):
    status = 413


def text_bytes(texts: Sequence[str]) -> int:
    """The UTF-8 size of the texts (an ASCII text's length is its size: no encoding needed)."""
    return sum(len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")) for text in texts)


def scan_passes(guardrails: int, *, prescan: bool = False) -> tuple[int, int]:
    """How many times each guardrail's filters read a request's texts, and how many times they are read in all:
    once by each guardrail, twice when the entity model is asked (the patterns first, so that a block refuses
    before the text goes to the model, then with its spans: guardrails.stage), and with several guardrails once
    more by all their filters together (the redaction pass)."""
    reads = 2 if prescan else 1
    return reads, guardrails * reads + (1 if guardrails > 1 else 0)


def scan_budget_check(*, texts: Iterable[str], guardrails: Sequence[str], prescan: bool = False) -> None:
    """Refuse (413) a request whose text is over a guardrail's or the request's scanned-bytes budget.

    `texts`: each text the filters read (a run of parts joined and each part: guardrails.texts); `guardrails`: the
    names of the request's guardrails whose filters scan them (each reads all of it); `prescan`: the entity model
    is asked, so each guardrail reads the texts twice (`scan_passes`). A text counts what the filters read, its
    folded views (`views_of`: a view may be 11 times the text), and never less than its own size (folding reads
    it). Counting stops at the first text over a budget, and folding one past it: the views of a text over
    budget are never built whole (20 MiB of U+FDFA would fold into ~230 MB).
    """
    if not guardrails:
        return
    per_guardrail = int(settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL)
    per_request = int(settings.GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST)
    reads, passes = scan_passes(len(guardrails), prescan=prescan)
    limit = min(per_guardrail // reads, per_request // passes)
    size = 0
    for text in texts:
        own = text_bytes((text,))
        if size + own > limit:  # over before folding anything
            size += own
            break
        try:
            read = sum(len(data) for _, data in views_of(text, limit - size))
        except ViewTooLarge as over:  # a view alone is over what is left
            size += over.size
            break
        size += max(own, read)
        if size > limit:
            break
    if size * reads > per_guardrail:
        read = size * reads
        raise ScanTooLarge(
            MSG_SCAN_TOO_LARGE_GUARDRAIL.format(size=read, name=guardrails[0], limit=per_guardrail),
            metadata={"limit": per_guardrail, "bytes": read, "setting": "GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL"},
        )
    total = size * passes
    if total > per_request:
        raise ScanTooLarge(
            MSG_SCAN_TOO_LARGE_REQUEST.format(size=size, count=len(guardrails), total=total, limit=per_request),
            metadata={"limit": per_request, "bytes": total, "setting": "GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST"},
        )


# --- The texts' views and matches, found once per text -----------------------------------------------------------


K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """The values of the last keys put, in at most `max_cost` (what `put` says each costs) and `max_items` entries;
    the oldest go first. Thread-safe (gthread workers); nothing here yields to other greenlets."""

    def __init__(self, max_cost: int, max_items: int) -> None:
        self.max_cost = max_cost
        self.max_items = max_items
        self._items: dict[K, tuple[V, int]] = {}
        self._cost = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            kept = self._items.get(key)
        return None if kept is None else kept[0]

    def put(self, key: K, value: V, cost: int) -> None:
        if cost > self.max_cost // 4:  # one large text would push out every other
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, cost)
            self._cost += cost
            while self._cost > self.max_cost or len(self._items) > self.max_items:
                self._cost -= self._items.pop(next(iter(self._items)))[1]


# A request's texts are read by its budget check, each guardrail, the entity model's pre-scan and the redaction
# pass: the views of the texts folded last are kept, so a text is folded once, not once per scan (by the stretch
# a view was folded in, textview.STRETCH, and the text). A text that is its own view with no look-alike letters
# is not kept: it costs only its encoding.
Views = tuple[tuple[TextView, bytes], ...]
VIEWS: Recent[tuple[int, str], Views] = Recent(32 << 20, 256)


def views_of(text: str, limit: int | None = None) -> Views:
    """The views a scan matches on (guardrails.textview.text_views), from VIEWS when the text was just folded.
    `limit`: folding stops with ViewTooLarge once a view is over that many bytes (nothing is kept)."""
    if text.isascii():
        return ((TextView(text), text.encode()),)
    key = (textview.STRETCH, text)
    kept = VIEWS.get(key)
    if kept is not None:
        return kept
    views = tuple(text_views(text, text.encode("utf-8", "surrogatepass"), limit))
    if len(views) > 1 or views[0][0].text is not text:
        VIEWS.put(key, views, len(text) + sum(len(data) for _, data in views))
    return views


# --- Groups of patterns and their combined programs -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Group:
    """Patterns scanned together: `members` index the policy's detectors. `search` (any match?), `spans` (the same
    with leftmost-longest semantics: `windows`) and `which` (an RE2::Set: which ones?) are None when RE2 cannot build
    them within the memory bound, or (`which`) when the group has one member."""

    members: tuple[int, ...]
    labels: tuple[str, ...]
    program_size: int
    search: Any
    spans: Any
    which: Any


def _options(max_mem: int, *, longest: bool = False) -> re2.Options:
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    options.never_capture = True
    options.longest_match = longest
    return options


def groups_for(patterns: Sequence[str], sizes: Sequence[int], labels: Sequence[str]) -> tuple[Group, ...]:
    """The patterns in order, in groups whose programs together stay under GROUP_MAX_PROGRAM instructions (a pattern
    over it alone is a group of one), each with its combined programs."""
    groups: list[Group] = []
    members: list[int] = []
    total = 0
    for index, size in enumerate(sizes):
        if members and total + size > GROUP_MAX_PROGRAM:
            groups.append(_group_at(members, patterns, labels))
            members, total = [], 0
        members.append(index)
        total += size
    if members:
        groups.append(_group_at(members, patterns, labels))
    return tuple(groups)


def _group_at(members: list[int], patterns: Sequence[str], labels: Sequence[str]) -> Group:
    return group_of(tuple(members), [patterns[index] for index in members], [labels[index] for index in members])


def group_of(members: tuple[int, ...], own: Sequence[str], labels: Sequence[str]) -> Group:
    """The group of the detectors `members`, whose patterns are `own` and labels `labels`, with its programs."""
    union = "|".join(f"(?:{pattern})" for pattern in own).encode()
    search, spans, which = None, None, None
    with contextlib.suppress(re2.error):
        search = re2.compile(union, _options(COMBINED_MAX_MEM))
    with contextlib.suppress(re2.error):
        spans = re2.compile(union, _options(COMBINED_MAX_MEM, longest=True))
    if len(own) > 1:
        which = re2.Set.SearchSet(_options(COMBINED_MAX_MEM))
        try:
            for pattern in own:
                which.Add(pattern.encode())
            which.Compile()
        except re2.error:
            which = None
    size = search.programsize if search is not None else 0
    return Group(members, tuple(labels), size, search, spans, which)


class Stopwatch:
    """The CPU time of the RE2 calls made inside `with watch:` blocks (the calling thread's: a gevent worker's other
    greenlets cannot run inside one C call, so they are not counted; `scan_pace` runs outside the blocks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.thread_time()

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.thread_time() - self._started


# A group whose combined programs read a text of at least SLOW_CHECK_BYTES slower than SLOW_NS_PER_BYTE is split
# into its patterns for the scans after (guardrails.policy): the bound lies well above what a usual group costs,
# dense matches included, and well below a group whose union has too many states (benchmarks/RESULTS.md). Results
# do not depend on it: groups of any shape find the same matches; only the cost does.
SLOW_CHECK_BYTES = 32 * 1024
SLOW_NS_PER_BYTE = 100


def too_slow(watch: Stopwatch, size: int) -> bool:
    return size >= SLOW_CHECK_BYTES and watch.seconds * 1e9 > SLOW_NS_PER_BYTE * size


# --- Searching, with each call's bytes counted --------------------------------------------------------------------

# How many places the combined program may be asked about one by one (`match_windows`) before a scan falls back to whole
# passes per detector: each costs a call from Python, and a text with that many is costly either way.
MAX_WINDOW_SEARCHES = 96


def match_windows(spans: Any, data: bytes, watch: Stopwatch) -> list[tuple[int, int]] | None:
    """The byte ranges outside which no pattern of the group matches; None when there are too many to list.

    `spans` is every pattern in one program with leftmost-longest semantics, so a search from any position gives
    the first place some pattern starts to match and the end of the longest match there. Every position where a
    pattern's match starts is found this way (searching again from one past each start), and a pattern's match
    found by its own search never ends after the longest one at its start. So the ranges [start, longest end),
    merged, hold every match: a pattern searched only inside them (RE2 still reads the text around a range for
    \\b and $) finds exactly what it finds in the whole text, at the cost of the ranges instead of the text.
    """
    found_windows: list[tuple[int, int]] = []
    position = 0
    for _ in range(MAX_WINDOW_SEARCHES):
        with watch:
            found = first_span(spans, data, position, len(data))
        scan_pace((found[1] if found is not None else len(data)) - position)
        if found is None:
            return found_windows
        start, end = found
        if found_windows and start <= found_windows[-1][1]:
            found_windows[-1] = (found_windows[-1][0], max(found_windows[-1][1], end))
        else:
            found_windows.append((start, end))
        position = start + 1
        while position < len(data) and 0x80 <= data[position] < 0xC0:  # the next character, not a continuation
            position += 1
        if position > len(data):
            return found_windows
    return None


def spans_in(regexp: Any, data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The spans of `regexp`'s non-empty matches in data[start:end], as `finditer` gives them."""
    while start <= end:
        span = first_span(regexp, data, start, end)
        scan_pace((span[1] if span is not None else end) - start)
        if span is None:
            return
        if span[0] == span[1]:
            start = span[1] + 1
            continue
        yield span
        start = span[1]


def set_match(which: Any, data: bytes, watch: Stopwatch) -> list[int] | None:
    """The indexes of the patterns of an RE2::Set that match in `data` (None or [] when it cannot say)."""
    scan_pace(len(data))
    with watch:
        return cast(list[int] | None, which.Match(data))


def char_start(data: bytes, offset: int) -> int:
    """The start of the UTF-8 character that holds byte `offset`."""
    while offset > 0 and 0x80 <= data[offset] < 0xC0:
        offset -= 1
    return offset


def char_end(data: bytes, offset: int) -> int:
    """The end of the UTF-8 character starting at byte `offset`."""
    offset += 1
    while offset < len(data) and 0x80 <= data[offset] < 0xC0:
        offset += 1
    return offset


class CharOffsets:
    """UTF-8 byte offsets (what RE2 reports on bytes) to character offsets, from byte `base` on.

    RE2 reports one pattern's offsets in increasing order, so each answer decodes only the bytes since the last
    one: converting all the matches of a pattern in a window costs one decode of the window, not one per match.
    """

    def __init__(self, text: str, data: bytes, base: int = 0, known: tuple[int, int] = (0, 0)) -> None:
        """`known`: a byte offset at or before `base` and its character offset."""
        self._data = data
        self._ascii = len(data) == len(text)
        self._base_byte = base
        self._base_char = base if self._ascii else known[1] + len(data[known[0] : base].decode("utf-8", "replace"))
        self._byte = base
        self._char = self._base_char

    def __call__(self, offset: int) -> int:
        if self._ascii:
            return offset
        if offset < self._byte:
            self._byte, self._char = self._base_byte, self._base_char
        self._char += len(self._data[self._byte : offset].decode("utf-8", errors="replace"))
        self._byte = offset
        return self._char
