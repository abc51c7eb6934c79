"""What content filters are and what they find: rules, matches, and a text's scan, whose overlaps resolve to the
strongest action (block beats redact beats flag: `Scan.regions`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal, NamedTuple

Action = Literal["block", "redact", "flag"]
ACTIONS: tuple[Action, ...] = ("block", "redact", "flag")
ACTION_RANK: dict[str, int] = {"flag": 1, "redact": 2, "block": 3}

REDACTION_TEMPLATE = "[REDACTED:{label}]"


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


@dataclass(frozen=True)
class Scan:
    """What a policy found in one text. `regions` resolve overlaps: block beats redact beats flag.

    A text with a certain block holds only the block matches (guardrails.policy: `ContentPolicy._find`).
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
