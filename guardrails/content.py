"""Content filters of guardrails: user patterns on RE2 plus the builtin detectors, compiled once per definition.

Every pattern, the user's and the builtins' candidate finders alike, runs on RE2 (google-re2): its matching time is
linear in the input whatever the pattern, so no filter can hang a worker (no backtracking, so no ReDoS). A scan
matches on the folded view of the text (guardrails.textview: look-alike spellings folded) and starts with a combined
program of the patterns (one per group of them whose program stays small: guardrails.scanning, which also bounds
the bytes a request scans and yields to other greenlets between RE2 calls) that lists the windows where any of them
matches (`match_windows`); only the patterns an RE2::Set names in a window are then run there for spans, and the
builtins confirm their candidates with the library that knows the format (libphonenumber, the Luhn check, the
stdlib `ipaddress`). `person-name` and `address` have no such library: they are found by a configured catalog
model (`GUARDRAILS_ENTITY_MODEL`), whose answer the caller passes to `ContentPolicy.scan` as spans.

On overlapping matches the strongest action wins: block beats redact beats flag (`Scan.regions`).
"""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import phonenumbers
import re2
from django.conf import settings

from guardrails.pacing import scan_pace
from guardrails.scanning import (
    GROUP_MAX_PROGRAM,
    SLOW_CHECK_BYTES,
    CharOffsets,
    Group,
    Stopwatch,
    char_end,
    char_start,
    group_of,
    groups_for,
    match_windows,
    set_match,
    spans_in,
    too_slow,
    views_of,
)

Action = Literal["block", "redact", "flag"]
ACTIONS: tuple[Action, ...] = ("block", "redact", "flag")
ACTION_RANK: dict[str, int] = {"flag": 1, "redact": 2, "block": 3}

# A pattern's length bound: RE2's program grows with the pattern, and every policy compiles its patterns into one
# combined program too; 4,096 characters is far beyond any real filter and keeps each program small.
MAX_PATTERN_CHARS = 4096
# RE2's memory budget for one compiled pattern (its DFA cache included); a pattern whose program does not fit is
# refused by `pattern_problem` ("pattern too large").
PATTERN_MAX_MEM = 8 << 20

BUILTIN_SLUGS: tuple[str, ...] = (
    "email",
    "phone",
    "ssn",
    "credit-card",
    "ip-address",
    "person-name",
    "address",
    "regex-prompt-injection",
)
# Found by the catalog model named in settings.GUARDRAILS_ENTITY_MODEL, not by code in this process.
ENTITY_SLUGS: tuple[str, ...] = ("person-name", "address")

REDACTION_TEMPLATE = "[REDACTED:{label}]"

# Bounds on the Python work per text, which would otherwise grow with the number of matches a caller can pack
# into a body (RE2's own work is linear either way): see `_locate`.
MAX_CANDIDATES_PER_FILTER = 1000
MAX_PHONE_CHECKS = 20  # libphonenumber costs about 0.1 ms a candidate


def _options(max_mem: int) -> re2.Options:
    """RE2 options for our programs: UTF-8 text, a memory bound, and no stderr noise for refused patterns."""
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    return options


# Where an empty match would show: what decides one is only the characters on either side (none, word, space,
# newline), and these texts hold every such pair.
_EMPTY_PROBES = (b"", b"a", b" ", b"\n", b"a a", b"a\nb", b" \n ", b"aa\n\n  ")


def _reason(exc: re2.error) -> str:
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
        compiled = re2.compile(pattern.encode(), _options(PATTERN_MAX_MEM))
    except re2.error as exc:
        return f"not a valid RE2 regular expression: {_reason(exc)}"
    if any(found.start() == found.end() for probe in _EMPTY_PROBES for found in compiled.finditer(probe)):
        return "the pattern can match empty text (an optional part or anchors alone), so it would match anywhere"
    return None


def entity_model() -> str:
    """The catalog model id that finds person names and addresses, or "" when this gateway has none."""
    return str(getattr(settings, "GUARDRAILS_ENTITY_MODEL", "") or "")


def builtin_problem(slug: str) -> str | None:
    """Why a builtin cannot be used here (None when it can): unknown slugs, and entity builtins without a model."""
    if slug not in BUILTIN_SLUGS:
        return f"unknown builtin {slug!r}; expected one of: {', '.join(BUILTIN_SLUGS)}"
    if slug in ENTITY_SLUGS and not entity_model():
        return (
            f"the {slug!r} builtin needs an entity-recognition model and this gateway has none configured "
            "(set GUARDRAILS_ENTITY_MODEL to a catalog model id)"
        )
    return None


# --- Builtins: a candidate pattern on RE2, then a confirmation by the library that knows the format ----------------


Span = tuple[int, int]
Confirm = Callable[[str, int, int], Iterable[Span]]


def _confirm_as_is(text: str, start: int, end: int) -> Iterable[Span]:
    """The candidate pattern alone decides (email, the prompt-injection phrases)."""
    return ((start, end),)


def _phone_region() -> str:
    """The region whose national formats are read without a leading +country code (ISO 3166 alpha-2)."""
    return str(getattr(settings, "GUARDRAILS_PHONE_REGION", "US") or "US")


# libphonenumber's matcher looks at the characters around a number (a letter glued to it means it is not one).
_PHONE_CONTEXT = 8


def _confirm_phone(text: str, start: int, end: int) -> Iterable[Span]:
    """Numbers that libphonenumber's matcher finds, and holds valid, in and around a candidate.

    A candidate in national form (no +country code) that is no valid number of the region is dropped first: that
    check costs a third of the matcher's, and digit runs in logs and ids are mostly such candidates.
    """
    if not text.startswith("+", start) and not _valid_national(text[start:end], _phone_region()):
        return
    offset = max(0, start - _PHONE_CONTEXT)
    for found_start, found_end in _phone_numbers_in(text[offset : end + _PHONE_CONTEXT], _phone_region()):
        if found_start < end - offset and found_end > start - offset:
            yield offset + found_start, offset + found_end


@functools.lru_cache(maxsize=4096)
def _phone_numbers_in(window: str, region: str) -> tuple[Span, ...]:
    """The matcher's findings in a small window, cached: it costs about 0.1 ms a call, and a conversation sends
    the same earlier messages again on every turn."""
    matcher = phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID)
    return tuple((found.start, found.end) for found in matcher)


@functools.lru_cache(maxsize=4096)
def _valid_national(candidate: str, region: str) -> bool:
    try:
        number = phonenumbers.parse(candidate, region)
    except phonenumbers.NumberParseException:
        return False
    return bool(phonenumbers.is_valid_number_for_region(number, region))


def _ssn_is_issuable(area: str, group: str, serial: str) -> bool:
    """SSA rules: area 000, 666 and 900-999, group 00 and serial 0000 are never issued."""
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _confirm_ssn(text: str, start: int, end: int) -> Iterable[Span]:
    """A dashed or spaced 3-2-4 number with one separator kind, in the issuable ranges."""
    candidate = text[start:end]
    separator = candidate[3]
    if candidate[6] == separator and _ssn_is_issuable(candidate[:3], candidate[4:6], candidate[7:]):
        yield start, end


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


# Where libphonenumber is asked (about 0.1 ms each, so the candidates must be few): the international form
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

# IPv4 dotted quads, and IPv6 in full (eight groups) or compressed ("::") form, possibly ending in a dotted quad;
# "12:30:45" is not a candidate. The stdlib `ipaddress` decides.
_HEX = "[0-9A-Fa-f]{1,4}"
_NON_ASCII = r"\x{80}-\x{10FFFF}"
_QUAD = r"\d{1,3}(?:\.\d{1,3}){3}"
_IP_CANDIDATES = (
    rf"\b{_QUAD}\b"
    rf"|{_HEX}(?::{_HEX}){{7}}"
    rf"|(?:{_HEX}(?::{_HEX}){{0,6}})?::(?:(?:{_HEX}:){{0,6}}(?:{_QUAD}|{_HEX}))?"
)

_PROMPT_INJECTION = (
    r"(?i)(?:"
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*"
    r"(?:previous|prior|above|earlier|preceding|original|initial|system)\s+"
    r"(?:instructions?|prompts?|rules|directions|guidelines|directives|messages?)\b"
    r"|\b(?:reveal|print|show|repeat|output|leak|tell\s+me)\s+(?:me\s+)?(?:your|the)\s+"
    r"(?:system\s+prompt|hidden\s+(?:instructions?|prompt)|initial\s+(?:instructions?|prompt)|instructions\s+above)\b"
    r"|\byou\s+are\s+now\s+(?:DAN|in\s+developer\s+mode|jailbroken|unrestricted|unfiltered)\b"
    r"|\b(?:DAN|developer)\s+mode\s+(?:enabled|activated|on)\b"
    r"|\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:have|had)\s+no\s+(?:rules|restrictions|guidelines)"
    r"|an?\s+(?:unrestricted|unfiltered|uncensored)\s+(?:ai|assistant|model))\b"
    r"|<\|im_start\|>\s*system|<\|system\|>|\[/?INST\]|<<SYS>>"
    r")"
)


@dataclass(frozen=True, slots=True)
class Builtin:
    """A builtin detector: its RE2 candidate pattern, the confirmation step, and the engines it uses."""

    slug: str
    candidate: str
    confirm: Confirm
    engines: tuple[str, ...]
    max_checks: int | None = None


BUILTINS: dict[str, Builtin] = {
    builtin.slug: builtin
    for builtin in (
        Builtin(
            "email",
            # Dot-atoms (RFC 5322) where any non-ASCII character counts as a letter (RFC 6531 addresses): a plain
            # code-point range keeps RE2's DFA small, where Unicode letter classes (\pL) made it 4 times slower.
            rf"[\w.%+'\-{_NON_ASCII}]+@[\w\-{_NON_ASCII}]+(?:\.[\w\-{_NON_ASCII}]+)*"
            rf"\.(?:[A-Za-z]{{2,}}|[{_NON_ASCII}]{{2,}})",
            _confirm_as_is,
            ("re2",),
        ),
        Builtin("phone", _PHONE_CANDIDATES, _confirm_phone, ("re2", "phonenumbers"), MAX_PHONE_CHECKS),
        Builtin("ssn", r"\b\d{3}[- ]\d{2}[- ]\d{4}\b", _confirm_ssn, ("re2",)),
        Builtin("credit-card", r"\b\d(?:[ -]?\d){12,18}\b", _confirm_card, ("re2", "luhn")),
        Builtin(
            "ip-address",
            _IP_CANDIDATES,
            _confirm_ip,
            ("re2", "ipaddress"),
        ),
        Builtin("regex-prompt-injection", _PROMPT_INJECTION, _confirm_as_is, ("re2",)),
    )
}


# --- Rules, policies and scans ------------------------------------------------------------------------------------


class Rule(NamedTuple):
    """One filter of a guardrail: a user pattern (kind "pattern") or a builtin (kind "builtin", source = slug).

    Rules, matches and entity spans are named tuples: many are made and hashed per request, and tuples do both in C.
    """

    kind: Literal["pattern", "builtin"]
    source: str
    action: Action
    label: str


class Match(NamedTuple):
    """One detection: where (character offsets), which filter (its label or builtin slug), its configured action."""

    start: int
    end: int
    label: str
    action: Action


@dataclass(frozen=True, slots=True)
class Region:
    """Overlapping matches merged: the strongest action among them applies to the whole span."""

    start: int
    end: int
    action: Action
    matches: tuple[Match, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        """The filters that matched here, each once, in order of appearance."""
        return tuple(dict.fromkeys(match.label for match in self.matches))

    @property
    def redaction_label(self) -> str:
        """The label shown in the replacement: the first (then longest) match that asked for this action."""
        own = [match for match in self.matches if match.action == self.action] or list(self.matches)
        return min(own, key=lambda match: (match.start, -match.end)).label


class EntitySpan(NamedTuple):
    """A span the entity model found (`slug` is "person-name" or "address"), in character offsets of the text."""

    start: int
    end: int
    slug: str


@dataclass(frozen=True)
class Scan:
    """What a policy found in one text. `regions` resolve overlaps: block beats redact beats flag.

    A text with a certain block holds only the block matches (see `ContentPolicy._candidates`).
    """

    text: str
    matches: tuple[Match, ...]

    @functools.cached_property
    def regions(self) -> tuple[Region, ...]:
        """Matches grouped into maximal overlapping runs, each with the strongest action of its members."""
        regions: list[Region] = []
        ordered = sorted(self.matches, key=lambda match: (match.start, -match.end))
        group: list[Match] = []
        group_end = -1
        for match in [*ordered, None]:
            if group and (match is None or match.start >= group_end):
                action = max((member.action for member in group), key=ACTION_RANK.__getitem__)
                regions.append(Region(group[0].start, group_end, action, tuple(group)))
                group = []
            if match is not None:
                group.append(match)
                group_end = max(group_end, match.end) if len(group) > 1 else match.end
        return tuple(regions)

    @property
    def action(self) -> Action | None:
        """The strongest action any region takes (None when nothing matched)."""
        if not self.regions:
            return None
        return max((region.action for region in self.regions), key=ACTION_RANK.__getitem__)

    def patterns(self, action: Action | None = None) -> tuple[str, ...]:
        """Labels or slugs that matched (in regions taking `action`, or all): never the matched text."""
        labels = (
            label for region in self.regions if action is None or region.action == action for label in region.labels
        )
        return tuple(dict.fromkeys(labels))

    def redacted(self) -> str:
        """The text with each redact region replaced by `[REDACTED:<label>]`; other text untouched."""
        pieces: list[str] = []
        cursor = 0
        for region in self.regions:
            if region.action != "redact":
                continue
            pieces.append(self.text[cursor : region.start])
            pieces.append(REDACTION_TEMPLATE.format(label=region.redaction_label))
            cursor = region.end
        pieces.append(self.text[cursor:])
        return "".join(pieces)


@dataclass(frozen=True, slots=True)
class _Detector:
    """A compiled pattern with the rule it reports as and how its candidates are confirmed."""

    rule: Rule
    regexp: Any  # re2._Regexp[bytes]; the stubs do not export the class
    confirm: Confirm
    max_checks: int | None


class ContentPolicy:
    """The compiled filters of one or more guardrails. Build with `policy_for` / `policy_combine` (cached)."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        detectors: list[_Detector] = []
        for rule in rules:
            if rule.kind == "builtin" and rule.source in ENTITY_SLUGS:
                continue
            if rule.kind == "builtin":
                builtin = BUILTINS[rule.source]
                pattern, confirm, max_checks = builtin.candidate, builtin.confirm, builtin.max_checks
            else:
                pattern, confirm, max_checks = rule.source, _confirm_as_is, None
            try:
                regexp = re2.compile(pattern.encode(), _options(PATTERN_MAX_MEM))
            except re2.error as exc:
                raise ValueError(f"content filter {rule.label!r}: {_reason(exc)}") from exc
            detectors.append(_Detector(rule, regexp, confirm, max_checks))
        self._detectors = tuple(detectors)
        # The text is read once per group, not once per pattern (guardrails.scanning: why groups stay small).
        self.groups = groups_for(
            [self._pattern(index) for index in range(len(detectors))],
            [detector.regexp.programsize for detector in detectors],
            [detector.rule.label for detector in detectors],
        )
        self.group_limit = GROUP_MAX_PROGRAM
        self._tried: set[int] = set()  # the groups timed on the start of a text (`_try_groups`), by id
        self.entity_rules: tuple[Rule, ...] = tuple(
            rule for rule in rules if rule.kind == "builtin" and rule.source in ENTITY_SLUGS
        )

    @property
    def entity_slugs(self) -> tuple[str, ...]:
        """The entity builtins this policy needs the model for (ask it before `scan`, pass its spans in)."""
        return tuple(dict.fromkeys(rule.source for rule in self.entity_rules))

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines that take part in a scan, for the pipeline entry (`re2`, `phonenumbers`, `luhn`, ...)."""
        names: list[str] = []
        for rule in self.rules:
            if rule.kind == "pattern":
                names.append("re2")
            elif rule.source in ENTITY_SLUGS:
                names.append(f"model:{entity_model()}")
            else:
                names.extend(BUILTINS[rule.source].engines)
        return tuple(dict.fromkeys(names))

    def scan(self, text: str, entities: Iterable[EntitySpan] = ()) -> Scan:
        """Every match of the policy in `text`, plus the entity model's spans for the entity builtins it holds.

        The patterns match on the folded view of the text (guardrails.textview: no zero-width characters,
        compatibility forms as plain ones); the matches are the spans of the original text that spelled them.
        """
        matches: list[Match] = list(self._entity_matches(entities))
        if not self._detectors or not text:
            return Scan(text, tuple(matches))
        for view, data in views_of(text):  # look-alike letters folded in a second view (guardrails.textview)
            for found in self._find(view.text, data):
                start, end = view.original(found.start, found.end)
                matches.append(found._replace(start=start, end=end))
        return Scan(text, tuple(dict.fromkeys(matches)))

    def _pattern(self, index: int) -> str:
        """The pattern of detector `index` (a builtin's candidate pattern)."""
        rule = self._detectors[index].rule
        return BUILTINS[rule.source].candidate if rule.kind == "builtin" else rule.source

    @property
    def scans_text(self) -> bool:
        """Whether the policy's filters read the text (entity builtins alone send it to the model instead)."""
        return bool(self._detectors)

    def _find(self, text: str, data: bytes) -> list[Match]:
        """The matches in one text: each group's detectors run only over the windows where one of them matches."""
        if len(data) >= SLOW_CHECK_BYTES:
            self._try_groups(data)
        plans = [plan for group in self.groups if (plan := self._plan(group, data)) is not None]
        if any(self._blocks_for_sure(found) for _, detectors in plans for found in detectors):
            # Locating costs a pass per detector: when a block filter that needs no confirmation matches, only
            # the block filters are located (the request is refused; its redactions and flags no longer matter).
            plans = [
                (places, [[detector for detector in found if detector.rule.action == "block"] for found in detectors])
                for places, detectors in plans
            ]
        counts: dict[int, int] = {}
        matches: list[Match] = []
        for places, detectors in plans:
            base = (0, 0)  # a byte offset and its character offset
            for (start, end), found in zip(places, detectors, strict=True):
                to_chars = CharOffsets(text, data, start, base)
                base = (start, to_chars(start))
                for detector in found:
                    matches.extend(_locate(detector, text, data, start, end, to_chars, counts))
        return matches

    def _try_groups(self, data: bytes) -> None:
        """Each combined group is timed once on the start of a large text before it reads all of it: one whose
        union proves slow there is split first (`_plan` still times every group on every large text)."""
        for group in self.groups:
            if len(group.members) < 2 or group.spans is None or id(group) in self._tried:
                continue
            self._tried.add(id(group))
            watch = Stopwatch()
            match_windows(group.spans, data[:SLOW_CHECK_BYTES], watch)
            if too_slow(watch, SLOW_CHECK_BYTES):
                self._split(group)

    def _plan(self, group: Group, data: bytes) -> tuple[list[tuple[int, int]], list[list[_Detector]]] | None:
        """Where a group's patterns can match in the text, and which detectors to run in each place (None: none)."""
        watch = Stopwatch()
        try:
            return self._plan_timed(group, data, watch)
        finally:
            if len(group.members) > 1 and too_slow(watch, len(data)):
                self._split(group)

    def _plan_timed(
        self, group: Group, data: bytes, watch: Stopwatch
    ) -> tuple[list[tuple[int, int]], list[list[_Detector]]] | None:
        found_windows = match_windows(group.spans, data, watch) if group.spans is not None else None
        if found_windows is not None and not found_windows:
            return None
        if found_windows is not None:
            return found_windows, [
                self._candidates(group, _which_in(group, data, s, e, watch)) for s, e in found_windows
            ]
        # Too many places to look at one by one, or no combined program: whole passes.
        first = None
        if group.search is not None:
            with watch:
                first = group.search.search(data)
            scan_pace(first.end() if first is not None else len(data))
            if first is None:
                return None
        which = set_match(group.which, data, watch) if group.which is not None else None
        return [(first.start() if first is not None else 0, len(data))], [self._candidates(group, which)]

    def _split(self, group: Group) -> None:
        """A group whose combined programs proved slow: its patterns are scanned each alone from now on (the
        policy is cached per definition, so once per process). Swapping the tuple is safe for scans under way;
        two threads splitting at once may lose one split, which a later scan makes again."""
        groups = self.groups
        if group not in groups:
            return
        alone = [
            group_of((member,), [self._pattern(member)], [label])
            for member, label in zip(group.members, group.labels, strict=True)
        ]
        at = groups.index(group)
        self.groups = (*groups[:at], *alone, *groups[at + 1 :])

    def _candidates(self, group: Group, which: list[int] | None) -> list[_Detector]:
        """The detectors of the group RE2::Set names; all of them if it cannot say (it has no fallback when its DFA
        runs out of memory and then reports no match at all, while the combined search, which falls back to the
        NFA, saw one)."""
        if not which:
            return [self._detectors[index] for index in group.members]
        return [self._detectors[group.members[index]] for index in sorted(which)]

    @staticmethod
    def _blocks_for_sure(detectors: list[_Detector]) -> bool:
        return any(detector.rule.action == "block" and detector.confirm is _confirm_as_is for detector in detectors)

    def _entity_matches(self, entities: Iterable[EntitySpan]) -> Iterator[Match]:
        """The model's spans as matches of this policy's entity rules (spans of slugs it does not hold are dropped)."""
        spans = tuple(entities)
        for rule in self.entity_rules:
            for span in spans:
                if span.slug == rule.source and span.end > span.start:
                    yield Match(span.start, span.end, rule.label, rule.action)


def _which_in(group: Group, data: bytes, start: int, end: int, watch: Stopwatch) -> list[int] | None:
    """The detectors matching in data[start:end], from the RE2::Set run on it with one character of context
    on either side (for \\b and line anchors): it may name one more, never one fewer."""
    if group.which is None:
        return None
    before = char_start(data, start - 1) if start > 0 else 0
    after = char_end(data, end) if end < len(data) else end
    return set_match(group.which, data[before:after], watch)


def _locate(
    detector: _Detector, text: str, data: bytes, start: int, end: int, to_chars: CharOffsets, counts: dict[int, int]
) -> Iterator[Match]:
    """The confirmed matches of one detector in data[start:end], in order (`counts`: its candidates so far).

    The Python work per candidate is bounded: past MAX_CANDIDATES_PER_FILTER candidates in one text, the rest of
    the text from the next candidate on is one match (fail closed: all of it is redacted, flagged or blocked), and
    past `max_checks` candidates of a costly confirmation (libphonenumber) the candidates count as found unchecked.
    """
    rule = detector.rule
    key = id(detector)
    for byte_start, byte_end in spans_in(detector.regexp, data, start, end):
        count = counts.get(key, 0)
        counts[key] = count + 1
        match_start, match_end = to_chars(byte_start), to_chars(byte_end)
        if count >= MAX_CANDIDATES_PER_FILTER:
            counts[key] = MAX_CANDIDATES_PER_FILTER * 2  # and no more from later windows
            yield Match(match_start, len(text), rule.label, rule.action)
            return
        if detector.max_checks is not None and count >= detector.max_checks:
            yield Match(match_start, match_end, rule.label, rule.action)
            continue
        for span_start, span_end in detector.confirm(text, match_start, match_end):
            yield Match(span_start, span_end, rule.label, rule.action)


# --- Building policies from guardrail definitions (cached) ---------------------------------------------------------


FilterKey = tuple[tuple[Any, Any, Any], ...]
BuiltinKey = tuple[tuple[Any, Any], ...]


def _rules_from(filters: FilterKey, builtins: BuiltinKey) -> tuple[Rule, ...]:
    """Rules from the stored JSON: a filter without a label reports as `filter-<n>` (1-based), never its text."""
    rules: list[Rule] = []
    for number, (pattern, action, label) in enumerate(filters, start=1):
        rules.append(Rule("pattern", str(pattern), action, str(label or f"filter-{number}")))
    for slug, action in builtins:
        if slug not in BUILTIN_SLUGS:
            raise ValueError(f"unknown content filter builtin {slug!r}")
        rules.append(Rule("builtin", slug, action, slug))
    for rule in rules:
        if rule.action not in ACTIONS:
            raise ValueError(f"content filter {rule.label!r}: unknown action {rule.action!r}")
    return tuple(dict.fromkeys(rules))


@functools.lru_cache(maxsize=1024)
def _compiled(rules: tuple[Rule, ...]) -> ContentPolicy:
    """One compiled policy per distinct set of rules: compiling costs far more than a scan."""
    return ContentPolicy(rules)


@functools.lru_cache(maxsize=1024)
def _policy_for_key(filters: FilterKey, builtins: BuiltinKey) -> ContentPolicy:
    """The policy of one definition, looked up by its plain values (building the rules costs more than a scan)."""
    return _compiled(_rules_from(filters, builtins))


def policy_for(filters: Sequence[Mapping[str, Any]], builtins: Sequence[Mapping[str, Any]]) -> ContentPolicy:
    """The compiled policy of one guardrail's `content_filters` and `content_filter_builtins` (cached by value)."""
    return _policy_for_key(
        tuple((item["pattern"], item["action"], item.get("label")) for item in filters),
        tuple((item["slug"], item["action"]) for item in builtins),
    )


@functools.lru_cache(maxsize=1024)
def _combined_policy(policies: tuple[ContentPolicy, ...]) -> ContentPolicy:
    """The union of compiled policies (themselves cached, so they are looked up by identity)."""
    return _compiled(tuple(dict.fromkeys(rule for policy in policies for rule in policy.rules)))


def policy_combine(policies: Iterable[ContentPolicy]) -> ContentPolicy:
    """The union of several guardrails' filters, as one policy (one pass over the text for all of them)."""
    return _combined_policy(tuple(policies))


# --- The entity model's side: what to ask, and how its answer becomes spans -----------------------------------------

ENTITY_INSTRUCTIONS = (
    "You find personal data in the text the user sends. Answer with one JSON object and nothing else, with one key "
    'per requested kind ({kinds}), each a list of the exact substrings of the text that are of that kind: "person-name"'
    ' for the names of people (not companies, products or places), "address" for postal or street addresses. Copy '
    "each substring exactly as it appears. Use an empty list when there is none."
)


def entity_instructions(slugs: Sequence[str]) -> str:
    """The system instructions for the entity model, asking only for the kinds the policy holds."""
    return ENTITY_INSTRUCTIONS.format(kinds=", ".join(json.dumps(slug) for slug in slugs))


def entity_spans(text: str, answer: str, slugs: Sequence[str]) -> tuple[EntitySpan, ...]:
    """Every occurrence in `text` of each substring the model reported, for the kinds asked.

    The model quotes substrings rather than offsets (models count characters badly); an answer that is not the JSON
    asked for raises ValueError, so the caller can fail closed rather than let unchecked text through.
    """
    try:
        found = json.loads(answer)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the entity model's answer is not JSON: {exc}") from exc
    if not isinstance(found, dict):
        raise ValueError("the entity model's answer is not a JSON object")
    spans: list[EntitySpan] = []
    for slug in slugs:
        values = found.get(slug) or []
        if not isinstance(values, list):
            raise ValueError(f"the entity model's {slug!r} is not a list")
        for value in values:
            if not isinstance(value, str) or not value.strip():
                continue
            start = text.find(value)
            while start != -1:
                spans.append(EntitySpan(start, start + len(value), slug))
                start = text.find(value, start + len(value))
    return tuple(dict.fromkeys(spans))
