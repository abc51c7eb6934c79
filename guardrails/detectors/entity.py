"""The `person-name` and `address` builtins: no library knows these formats, so a configured catalog model
(`GUARDRAILS_ENTITY_MODEL`) finds them. This module says what to ask it and turns its answer into spans; the
call itself is the stage's (guardrails.stage), and the spans reach `ContentPolicy.scan` as `entities`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

from django.conf import settings

# Found by the catalog model named in settings.GUARDRAILS_ENTITY_MODEL, not by code in this process.
ENTITY_SLUGS: tuple[str, ...] = ("person-name", "address")

ENTITY_INSTRUCTIONS = (
    "You find personal data in the text the user sends. Answer with one JSON object and nothing else, with one key "
    'per requested kind ({kinds}), each a list of the exact substrings of the text that are of that kind: "person-name"'
    ' for the names of people (not companies, products or places), "address" for postal or street addresses. Copy '
    "each substring exactly as it appears. Use an empty list when there is none."
)


class EntitySpan(NamedTuple):
    """A span the entity model found (`slug` is "person-name" or "address"), in character offsets of the text."""

    start: int
    end: int
    slug: str


def entity_model() -> str:
    """The catalog model id that finds person names and addresses, or "" when this gateway has none."""
    return str(getattr(settings, "GUARDRAILS_ENTITY_MODEL", "") or "")


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
