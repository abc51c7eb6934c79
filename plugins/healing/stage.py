"""The `response-healing` plugin: a JSON answer (`text.format` `json_object` / `json_schema`) that is not valid
JSON is repaired (json-repair: markdown fences, prose around the JSON, trailing commas, unquoted keys, single
quotes, unbalanced brackets) and, with a schema, checked against it (jsonschema, bounded: see healing_schema
below); the answer's text becomes the repaired JSON. An answer that cannot be repaired, or that the schema
refuses, or that `max_output_tokens` cut (a truncated value is not the model's answer), is returned unchanged.
Every request with the plugin on gets one `response_plugin` pipeline entry saying what happened, streams and
requests without a JSON `text.format` included (`note`: those are not healed)."""

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

import re2

from plugins.common import repair
from plugins.common.config import plugin_settings
from routing.canonical import CanonicalResponse, OutputMessage
from routing.stages import RequestContext, Restaged, StageEntry

PLUGIN_ID = "response-healing"
JSON_FORMATS = ("json_object", "json_schema")
MAX_TEXT_CHARS = 200_000  # longer answers are returned unchanged: json-repair is pure Python (up to ~7 s per MB)
MAX_SCHEMA_CHARS = 100_000  # the caller's schema, serialized
MAX_VALIDATION_STEPS = 100_000  # keyword evaluations: `$ref`/`anyOf` nesting can be exponential in the schema
MAX_UNIQUE_ITEMS = 2_000  # jsonschema's uniqueItems falls back to pairwise comparison of objects
MAX_REASON_CHARS = 200

# A jsonschema keyword function: (validator, the keyword's value, the instance, the schema) -> its errors.
# jsonschema has no type information (its validators and errors are Any); the values are JSON.
Keyword = Callable[[Any, Any, Any, Any], Iterable[Any] | None]

NOT_HEALED_STREAM = "not healed: streaming (the answer is relayed as it is generated)"
NOT_HEALED_NO_FORMAT = "not healed: the request has no text.format json_object or json_schema"


class Fix(StrEnum):
    """What was wrong with the model's text, in the pipeline entry's `data.fixes`."""

    MARKDOWN_FENCE = "markdown_fence"
    SURROUNDING_TEXT = "surrounding_text"
    TRAILING_COMMA = "trailing_comma"
    UNQUOTED_KEYS = "unquoted_keys"
    SINGLE_QUOTES = "single_quotes"
    UNBALANCED_BRACKETS = "unbalanced_brackets"
    OTHER = "other_syntax"


@dataclass(frozen=True, slots=True)
class Healing:
    """The verdict on one answer: `text` is the repaired JSON, or None to leave the answer as it is."""

    outcome: str  # healed | passed | not healed: <why>
    text: str | None = None
    fixes: tuple[Fix, ...] = ()
    schema: str = "none"  # none | valid | invalid | unchecked
    reason: str = ""


class ResponseHealingStage:
    type = "response_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def wants(self, ctx: RequestContext) -> bool:
        return not ctx.stream and _json_format(ctx) is not None and plugin_settings(ctx, PLUGIN_ID) is not None

    def note(self, ctx: RequestContext) -> StageEntry | None:
        """The entry for a request with the plugin on that is not healed (a stream, no JSON text.format)."""
        if plugin_settings(ctx, PLUGIN_ID) is None:
            return None
        outcome = NOT_HEALED_STREAM if ctx.stream else NOT_HEALED_NO_FORMAT
        return StageEntry(type=self.type, name=self.name, outcome=outcome, data={"fixes": []})

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> Restaged:
        text_format = _json_format(ctx) or {}
        texts = [item.text for item in response.output if isinstance(item, OutputMessage) and item.text]
        healing = heal_answer(response, "".join(texts), text_format)
        if healing.text is not None:
            response = _with_text(response, healing.text)
        data: dict[str, Any] = {"fixes": [str(fix) for fix in healing.fixes], "schema": healing.schema}
        if healing.reason:
            data["reason"] = healing.reason
        entry = StageEntry(type=self.type, name=self.name, outcome=healing.outcome, data=data)
        figures = {"outcome": healing.outcome.split(":")[0], "fixes": data["fixes"], "schema": healing.schema}
        return Restaged(response=response, entries=(entry,), record={"plugins": {PLUGIN_ID: figures}})


def _json_format(ctx: RequestContext) -> dict[str, Any] | None:
    text_format = ctx.request.text_format if ctx.request is not None else None
    return text_format if text_format and text_format.get("type") in JSON_FORMATS else None


def _with_text(response: CanonicalResponse, text: str) -> CanonicalResponse:
    """The answer's text replaced: the first text message carries it, the others (split text blocks) go."""
    output, placed = [], False
    for item in response.output:
        if isinstance(item, OutputMessage) and item.text:
            if placed:
                continue
            item, placed = replace(item, text=text), True
        output.append(item)
    return replace(response, output=tuple(output))


def heal_answer(response: CanonicalResponse, text: str, text_format: dict[str, Any]) -> Healing:
    """The verdict on the answer's text for a `json_object` / `json_schema` format."""
    if response.status == "incomplete":
        cut = response.incomplete_reason or "incomplete"
        return Healing(outcome=f"not healed: the output is incomplete ({cut})", reason=cut)
    if not text.strip():
        return Healing(outcome="not healed: the answer has no text", reason="empty")
    if len(text) > MAX_TEXT_CHARS:
        return Healing(outcome="not healed: the answer is too long to repair", reason=f"over {MAX_TEXT_CHARS} chars")
    fixes: tuple[Fix, ...] = ()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        try:
            value, fixes = _repair(text)
        except repair.RepairTooSlow:
            why = f"repair took over {repair.REPAIR_SECONDS:g} s"
            return Healing(outcome=f"not healed: {why}", reason=why)
    if fixes and not isinstance(value, dict | list):
        return Healing(outcome="not healed: no JSON could be recovered", fixes=fixes, reason="unrepairable")
    if text_format["type"] == "json_object" and not isinstance(value, dict):
        return Healing(outcome="not healed: the answer is not a JSON object", fixes=fixes, reason="not an object")
    schema, reason = "none", ""
    if text_format["type"] == "json_schema":
        schema, reason = healing_schema(value, text_format.get("schema"))
    if schema == "invalid":
        return Healing(outcome="not healed: the answer does not match the schema", fixes=fixes, schema=schema,
                       reason=reason)  # fmt: skip
    if not fixes:
        return Healing(outcome="passed", schema=schema, reason=reason)
    repaired = json.dumps(value, ensure_ascii=False)
    return Healing(outcome="healed", text=repaired, fixes=fixes, schema=schema, reason=reason)


# ---- repair ------------------------------------------------------------------------------------------------------

FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:\n?```|\Z)", re.DOTALL)
STRINGS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|\'(?:[^\'\\\n]|\\.)*\'?')
TRAILING_COMMA = re.compile(r",\s*(?:[}\]]|\Z)")
UNQUOTED_KEY = re.compile(r"[{,]\s*[A-Za-z_$][\w$-]*\s*:")


def _repair(text: str) -> tuple[object, tuple[Fix, ...]]:
    """The value json-repair recovers from the text, and what was wrong with it (for the entry)."""
    fixes: list[Fix] = []
    candidate = text
    fenced = FENCE.search(candidate)
    if fenced:
        fixes.append(Fix.MARKDOWN_FENCE)
        if candidate[: fenced.start()].strip() or candidate[fenced.end() :].strip():
            fixes.append(Fix.SURROUNDING_TEXT)
        candidate = fenced.group(1)
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        return "", (*fixes, Fix.OTHER)
    if candidate[:start].strip() and Fix.SURROUNDING_TEXT not in fixes:
        fixes.append(Fix.SURROUNDING_TEXT)
    candidate = candidate[start:]
    try:  # valid JSON followed by prose: the JSON as it is
        value, end = json.JSONDecoder().raw_decode(candidate)
        if Fix.SURROUNDING_TEXT not in fixes and candidate[end:].strip():
            fixes.append(Fix.SURROUNDING_TEXT)
        return value, tuple(fixes) or (Fix.OTHER,)
    except (ValueError, RecursionError):
        pass
    fixes += _syntax_faults(candidate)
    try:
        value = repair.repair_bounded(candidate)
    except (ValueError, RecursionError):
        return "", (*fixes, Fix.OTHER)
    return value, tuple(dict.fromkeys(fixes)) or (Fix.OTHER,)


def _syntax_faults(candidate: str) -> list[Fix]:
    """A linear scan for the usual faults, on the text with its strings blanked out (for the entry only)."""
    faults = []
    if any(match.group().startswith("'") for match in STRINGS.finditer(candidate)):
        faults.append(Fix.SINGLE_QUOTES)
    skeleton = STRINGS.sub('""', candidate)
    if TRAILING_COMMA.search(skeleton):
        faults.append(Fix.TRAILING_COMMA)
    if UNQUOTED_KEY.search(skeleton):
        faults.append(Fix.UNQUOTED_KEYS)
    depth = 0
    for char in skeleton:
        depth += 1 if char in "{[" else -1 if char in "}]" else 0
    if depth:
        faults.append(Fix.UNBALANCED_BRACKETS)
    return faults or [Fix.OTHER]


# ---- schema check ------------------------------------------------------------------------------------------------


class Unchecked(Exception):
    """The schema cannot be checked within the limits (too costly, an unsupported regex, unresolvable $ref)."""


_steps: ContextVar[list[int]] = ContextVar("healing_steps")


def healing_schema(value: object, schema: object) -> tuple[str, str]:
    """("valid" | "invalid" | "unchecked", why). The schema is the caller's: its size, its evaluation steps
    and its regexes (RE2, linear time) are bounded, and it is never fetched from anywhere ($ref stays local)."""
    if not isinstance(schema, dict):
        return "unchecked", "no schema object"
    text = json.dumps(schema, sort_keys=True)
    if len(text) > MAX_SCHEMA_CHARS:
        return "unchecked", f"the schema is over {MAX_SCHEMA_CHARS} characters"
    import jsonschema  # type: ignore[import-untyped]  # here: ~3 MB a worker carries only once it checks a schema
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    token = _steps.set([0])
    try:
        error = jsonschema.exceptions.best_match(_validator(text).iter_errors(value))
    except (Unchecked, SchemaError, Unresolvable, RecursionError, re2.error, TypeError, ValueError) as exc:
        return "unchecked", _short(str(getattr(exc, "message", None) or exc) or type(exc).__name__)
    finally:
        _steps.reset(token)
    if error is None:
        return "valid", ""
    path = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return "invalid", _short(f"at ${path}: {error.message}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


@lru_cache(maxsize=128)
def _validator(schema_text: str) -> Any:
    """The bounded validator of a schema (by its text: a caller sends the same schema request after request, and
    checking it against its metaschema costs ~2 ms). Raises SchemaError for a schema that is not one."""
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return _bounded(cls)(schema)


@lru_cache(maxsize=16)
def _bounded(cls: Any) -> Any:
    """The validator class with every keyword counted against MAX_VALIDATION_STEPS, regexes on RE2, and
    uniqueItems bounded."""
    import jsonschema

    keywords = {name: _counted(check) for name, check in cls.VALIDATORS.items()}
    keywords["pattern"] = _counted(_pattern)
    keywords["patternProperties"] = _counted(_pattern_properties)
    if "uniqueItems" in cls.VALIDATORS:
        keywords["uniqueItems"] = _counted(_unique_items(cls.VALIDATORS["uniqueItems"]))
    return jsonschema.validators.extend(cls, keywords)


def _counted(check: Keyword) -> Keyword:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterable[Any] | None:
        steps = _steps.get()
        steps[0] += 1
        if steps[0] > MAX_VALIDATION_STEPS:
            raise Unchecked(f"the schema check took over {MAX_VALIDATION_STEPS} steps")
        return check(validator, value, instance, schema)

    return counted


@lru_cache(maxsize=256)
def _regex(pattern: str) -> "re2._Regexp[str]":  # the stubs' generic; re2._Regexp takes no arguments at run time
    options = re2.Options()
    options.max_mem = 8 << 20
    return re2.compile(pattern, options)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, pattern_properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        regex = _regex(pattern)
        for key, item in instance.items():
            if regex.search(key):
                yield from validator.descend(item, subschema, path=key, schema_path=pattern)


def _unique_items(check: Callable[[Any, Any, Any, Any], Iterable[Any]]) -> Keyword:
    def unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[Any]:
        if unique and validator.is_type(instance, "array") and len(instance) > MAX_UNIQUE_ITEMS:
            raise Unchecked(f"uniqueItems over an array of more than {MAX_UNIQUE_ITEMS} items")
        yield from check(validator, unique, instance, schema)

    return unique_items
