"""Content policies: the compiled filters of guardrails (user patterns and builtin detectors), built once per
definition and cached, and the scan of a text with them.

A scan matches on the folded view of the text (guardrails.textview: look-alike spellings folded) and starts with a
combined program of the patterns (one per group of them whose program stays small: guardrails.scan, which also
bounds the bytes a request scans and yields to other greenlets between RE2 calls) that lists the windows where any
of them matches (`match_windows`); only the patterns an RE2::Set names in a window are then run there for spans,
and the builtins confirm their candidates (guardrails.detectors). `person-name` and `address` are found by a
configured catalog model, whose answer the caller passes to `ContentPolicy.scan` as spans.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from guardrails.detectors import BUILTIN_SLUGS, BUILTINS
from guardrails.detectors.base import Confirm, confirm_as_is
from guardrails.detectors.entity import ENTITY_SLUGS, EntitySpan, entity_model
from guardrails.matches import ACTIONS, Match, Rule, Scan
from guardrails.pacing import scan_pace
from guardrails.patterns import PATTERN_MAX_MEM, re2_options, re2_reason
from guardrails.scan import (
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

# Bounds on the Python work per text, which would otherwise grow with the number of matches a caller can pack
# into a body (RE2's own work is linear either way): see `_locate`.
MAX_CANDIDATES_PER_FILTER = 1000


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
                pattern, confirm, max_checks = rule.source, confirm_as_is, None
            try:
                regexp = re2.compile(pattern.encode(), re2_options(PATTERN_MAX_MEM))
            except re2.error as exc:
                raise ValueError(f"content filter {rule.label!r}: {re2_reason(exc)}") from exc
            detectors.append(_Detector(rule, regexp, confirm, max_checks))
        self._detectors = tuple(detectors)
        # The text is read once per group, not once per pattern (guardrails.scan: why groups stay small).
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
        return any(detector.rule.action == "block" and detector.confirm is confirm_as_is for detector in detectors)

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
