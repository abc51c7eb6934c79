"""The guardrail pre-stage: before routing, on every inference request (JSON and stream), the caller's
guardrails (the key's, the member's, else the workspace default: guardrails.selectors) are applied.

- Content: every text the caller sends (instructions, each message part, the text of the file annotations an
  answer sent back carries (the file-parser uses it instead of the file), function call arguments and tool
  outputs; file and image data are not text) is scanned by each guardrail's filters (guardrails.content). A
  `block` anywhere refuses the request with 403 naming the guardrail, its `metadata.patterns` the labels or
  slugs (never the text); otherwise `redact` matches are replaced by `[REDACTED:<label>]` before the request
  leaves (all guardrails' filters together: on one span block beats redact beats flag); `flag` lets it through,
  recorded in the pipeline entry and on the generation record.
- Routing: each guardrail's model and provider lists, ZDR and data-collection become a RoutingLimit (an
  endpoint must pass every limit: allow-lists intersect, ignore-lists add up); routing refuses with 403 naming
  the guardrail when they leave nothing.
Each guardrail that applies adds its pipeline entry (`guardrail_id`, `guardrail_scope`, `data{action,
detected, engines, patterns}`)."""

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from gateway.accounts.authentication import Caller
from gateway.billing.services import SpendCap, SpendCapExceeded, spend_caps_check
from gateway.errors import GatewayError
from guardrails.content import (
    ACTION_RANK,
    ContentPolicy,
    EntitySpan,
    Scan,
    entity_instructions,
    entity_model,
    entity_spans,
    policy_combine,
    policy_for,
)
from guardrails.selectors import GuardrailRule, guardrail_generations, guardrails_for_caller, period_bounds
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import (
    CanonicalRequest,
    FunctionCall,
    FunctionCallOutput,
    Item,
    Message,
    Reasoning,
    TextPart,
)
from routing.errors import ErrorType
from routing.limits import RoutingLimit
from routing.pricing import usage_cost
from routing.selection import endpoints_for_request
from routing.stages import Block, RequestContext, Staged, StageEntry

SUMMARY = {"block": "blocked", "redact": "redacted", "flag": "flagged", None: "passed"}
MAX_ENTITY_TEXT_CHARS = 100_000  # the text sent to the entity model for person names and addresses
MSG_ENTITY_TOO_LONG = (
    "A guardrail's person-name or address check reads at most {limit} characters of text and this request has more"
)
MSG_ENTITY_CHECK = (
    "A guardrail's person-name or address check could not run ({model} did not answer usably): the request "
    "was not sent unchecked; try again"
)


@dataclass(frozen=True, slots=True)
class _Text:
    """One text of the request and how to put a changed one back."""

    text: str
    put: Callable[[CanonicalRequest, str], CanonicalRequest]


class GuardrailStage:
    type = "guardrail"
    name = "guardrails"
    plugin_ids: tuple[str, ...] = ()

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        rules = _rules(ctx.caller)
        if not rules:
            return Staged(request)
        caps = _caps(rules, ctx.caller)
        if caps:  # a spent budget refuses before anything paid runs (the entity model here, later stages' engines)
            try:
                spend_caps_check(caps, account_id=ctx.caller.account_id, api_key_id=ctx.caller.key_id)
            except SpendCapExceeded as spent:
                return Block(spent.message, status=403)
        texts = list(_texts(request))
        policies = [policy_for(*rule.policy_inputs()) for rule in rules]
        entities: dict[int, tuple[EntitySpan, ...]] = {}
        cost = Decimal(0)
        if policy_combine(policies).entity_slugs:
            # A block the patterns find refuses before the text goes to the entity model.
            scans = [[policy.scan(t.text) for t in texts] for policy in policies]
            if block := _block(rules, policies, scans):
                return block
            entities, cost = _entities(policy_combine(policies), texts, _limits(rules))
        scans = [[policy.scan(t.text, entities.get(i, ())) for i, t in enumerate(texts)] for policy in policies]
        entries = _costed(tuple(map(_entry, rules, policies, scans)), policies, cost)
        if block := _block(rules, policies, scans, entries):
            return replace(block, cost_usd=cost)  # the entity model's call ran: charged with the refusal
        if any(_patterns(rule_scans, "redact") for rule_scans in scans):
            # One guardrail: its scans are the combined ones; several: their filters together, once more.
            combined = scans[0] if len(policies) == 1 else None
            policy = policy_combine(policies)
            for index, text in enumerate(texts):
                scan = combined[index] if combined else policy.scan(text.text, entities.get(index, ()))
                redacted = scan.redacted()
                if redacted != text.text:
                    request = text.put(request, redacted)
        return Staged(request, entries=entries, limits=_limits(rules), caps=caps, cost_usd=cost)


def _costed(entries: tuple[StageEntry, ...], policies: list[ContentPolicy], cost: Decimal) -> tuple[StageEntry, ...]:
    """The entity model's call (one for all the guardrails) shown on the entry of the first guardrail that asked."""
    if not cost:
        return entries
    asked = next(index for index, policy in enumerate(policies) if policy.entity_slugs)
    return tuple(replace(entry, cost_usd=cost) if index == asked else entry for index, entry in enumerate(entries))


def _block(
    rules: list[GuardrailRule],
    policies: list[ContentPolicy],
    scans: list[list[Scan]],
    entries: tuple[StageEntry, ...] | None = None,
) -> Block | None:
    entries = entries if entries is not None else tuple(map(_entry, rules, policies, scans))
    for rule, rule_scans in zip(rules, scans, strict=True):
        blocked = _patterns(rule_scans, "block")
        if blocked:
            return Block(
                f"Request blocked by guardrail {rule.name}: the input matched {', '.join(blocked)}",
                status=403,
                metadata={"patterns": list(blocked)},
                error_type=ErrorType.CONTENT_POLICY_VIOLATION,
                entries=entries,
            )
    return None


def _texts(request: CanonicalRequest) -> Iterator[_Text]:
    if request.instructions:
        yield _Text(request.instructions, lambda r, new: replace(r, instructions=new))
    for index, item in enumerate(request.input):
        match item:
            case Message():
                for part_index, part in enumerate(item.content):
                    if isinstance(part, TextPart) and part.text:
                        yield _Text(part.text, _part_setter(index, part_index))
                    if isinstance(part, TextPart):
                        yield from _annotation_texts(index, part_index, part)
            case FunctionCallOutput():
                yield _Text(item.output, _item_setter(index, "output"))
            case FunctionCall():
                yield _Text(item.arguments, _item_setter(index, "arguments"))
            case Reasoning():  # a replayed reasoning item's text is sent on (OpenAI summaries, Anthropic thinking)
                for name in ("summary", "content"):
                    for text_index, text in enumerate(getattr(item, name)):
                        if text:
                            yield _Text(text, _reasoning_setter(index, name, text_index))
    yield from _tool_texts(request)
    for path, text in _strings(request.text_format, ()):  # a structured output's schema is read like a tool's
        yield _Text(text, _format_setter(path))


def _annotation_texts(index: int, part_index: int, part: TextPart) -> Iterator[_Text]:
    """The text of each file annotation an answer sent back carries: the file-parser hands it to the model in place
    of parsing the file again, so it is text the caller sends (scanned and redacted like the rest)."""
    for number, annotation in enumerate(part.annotations):
        file = annotation.get("file") if isinstance(annotation, dict) and annotation.get("type") == "file" else None
        content = file.get("content") if isinstance(file, dict) else None
        if not isinstance(content, list):
            continue
        for position, block in enumerate(content):
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"]:
                path = (number, "file", "content", position, "text")
                yield _Text(block["text"], _annotation_setter(index, part_index, path))


def _annotation_setter(index: int, part_index: int, path: tuple) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        part = parts[part_index]
        assert isinstance(part, TextPart)
        parts[part_index] = replace(part, annotations=tuple(_set_in(list(part.annotations), path, new)))
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put


def _tool_texts(request: CanonicalRequest) -> Iterator[_Text]:
    """Tool definitions are text the model reads: each description, and the strings and property names of each
    parameter schema."""
    for index, tool in enumerate(request.tools):
        if tool.description:
            yield _Text(tool.description, _tool_setter(index, ()))
        for path, text in _strings(tool.parameters, ()):
            yield _Text(text, _tool_setter(index, path))


@dataclass(frozen=True, slots=True)
class _Key:
    """A step of a path that names a dict's key itself (a property name), not the value under it."""

    name: str


def _strings(value: object, path: tuple) -> Iterator[tuple[tuple, str]]:
    """Every string of a JSON value and every key of its objects (a schema's property names reach the model as
    much as its descriptions). A key comes after what is under it, so that changing the texts in this order
    never renames a key on the path of a text still to change."""
    if isinstance(value, str) and value:
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from _strings(inner, (*path, key))
            if isinstance(key, str) and key:
                yield (*path, _Key(key)), key
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from _strings(inner, (*path, position))


def _set_in(tree: Any, path: tuple, new: str) -> Any:
    """A copy of the JSON value `tree` with the string at `path` (or the key, for a final _Key) replaced."""
    tree = copy.deepcopy(tree)
    node: Any = tree
    for step in path[:-1]:
        node = node[step]
    last = path[-1]
    if not isinstance(last, _Key):
        node[last] = new
        return tree
    name, number = new, 1
    while name in node and name != last.name:  # two keys redacted alike stay two properties
        number += 1
        name = f"{new} ({number})"
    renamed = {name if key == last.name else key: inner for key, inner in node.items()}
    node.clear()
    node.update(renamed)
    return tree


def _tool_setter(index: int, path: tuple) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    """`path` () is the description, else where the string is in the parameters."""

    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        tools = list(request.tools)
        if not path:
            tools[index] = replace(tools[index], description=new)
        else:
            tools[index] = replace(tools[index], parameters=_set_in(tools[index].parameters, path, new))
        return replace(request, tools=tuple(tools))

    return put


def _format_setter(path: tuple) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        return replace(request, text_format=_set_in(request.text_format, path, new))

    return put


def _item_setter(index: int, name: str) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items = list(request.input)
        items[index] = replace(items[index], **{name: new})  # type: ignore[arg-type]  # a call or its output
        return replace(request, input=tuple(items))

    return put


def _reasoning_setter(index: int, name: str, text_index: int) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        texts = list(getattr(items[index], name))
        texts[text_index] = new
        items[index] = replace(items[index], **{name: tuple(texts)})  # type: ignore[arg-type]  # a Reasoning
        return replace(request, input=tuple(items))

    return put


def _part_setter(index: int, part_index: int) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        parts[part_index] = replace(parts[part_index], text=new)  # type: ignore[arg-type]  # a TextPart
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put


def _patterns(scans: list[Scan], action: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(label for scan in scans for label in scan.patterns(action)))  # type: ignore[arg-type]


def _entry(rule: GuardrailRule, policy: ContentPolicy, scans: list[Scan]) -> StageEntry:
    actions: list[str] = [found for scan in scans if (found := scan.action) is not None]
    action = max(actions, key=lambda name: ACTION_RANK[name]) if actions else None
    return StageEntry(
        type="guardrail",
        name=rule.name,
        outcome=SUMMARY[action],
        extra={"guardrail_id": str(rule.id), "guardrail_scope": rule.scope},
        data={
            "action": action or "allow",
            "detected": action is not None,
            "engines": list(policy.engines),
            "patterns": list(dict.fromkeys(label for scan in scans for label in scan.patterns())),
        },
    )


def caller_limits(caller: Caller) -> tuple[RoutingLimit, ...]:
    """The routing limits of a caller's guardrails (for listings: routing.limits asks here)."""
    return _limits(_rules(caller))


def _rules(caller: Caller) -> list[GuardrailRule]:
    return guardrails_for_caller(
        account_id=caller.account_id,
        workspace_id=caller.workspace_id,
        key_hash=caller.key_hash,
        user_id=caller.creator_user_id,
    )


def _limits(rules: list[GuardrailRule]) -> tuple[RoutingLimit, ...]:
    return tuple(limit for rule in rules if (limit := _limit(rule)))


def _caps(rules: list[GuardrailRule], caller: Caller) -> tuple[SpendCap, ...]:
    """Each budget guardrail's cap: a key's guardrail on the key's spend, a member's on every key the member
    created, the workspace default on the spend under it across the workspace (what its record shows); each
    checked on its own, so the lowest remaining wins."""
    caps = []
    for rule in rules:
        if rule.limit_usd is None:
            continue
        since, resets_at = period_bounds(rule.reset_interval)
        pooled = rule.scope == "workspace"
        caps.append(
            SpendCap(
                source=f"guardrail {rule.name}",
                limit=rule.limit_usd,
                since=since,
                resets_at=resets_at,
                include_byok=rule.include_byok_in_budgets,
                member_user_id=caller.creator_user_id if rule.scope == "member" else None,
                pool=guardrail_generations(
                    guardrail_id=rule.id, workspace_id=rule.workspace_id, is_workspace_default=True
                )
                if pooled
                else None,
                pool_workspace_id=rule.workspace_id if pooled else None,
            )
        )
    return tuple(caps)


def _limit(rule: GuardrailRule) -> RoutingLimit | None:
    limit = RoutingLimit(
        source=f"guardrail {rule.name}",
        allowed_models=rule.allowed_models,
        ignored_models=rule.ignored_models,
        allowed_providers=rule.allowed_providers,
        ignored_providers=rule.ignored_providers,
        zdr=rule.enforce_zdr,
        deny_data_collection=rule.data_collection == "deny",
    )
    return limit if limit != RoutingLimit(source=limit.source) else None


def _entities(
    policy: ContentPolicy, texts: list[_Text], limits: tuple[RoutingLimit, ...]
) -> tuple[dict[int, tuple[EntitySpan, ...]], Decimal]:
    """Person names and addresses, found by the configured entity model (one call for all the texts), and what
    that call cost at the list price of the endpoint that served it ({} and 0 when no guardrail asks for them).
    A guardrail cannot ask without the model configured (refused at creation), and a request whose entity check
    cannot run is refused rather than let through unchecked."""
    slugs = policy.entity_slugs
    if not slugs or not texts:
        return {}, Decimal(0)
    joined = "\n\n".join(text.text for text in texts)
    if len(joined) > MAX_ENTITY_TEXT_CHARS:  # the model would not see the rest: refused, not let through unchecked
        raise GatewayError(MSG_ENTITY_TOO_LONG.format(limit=MAX_ENTITY_TEXT_CHARS), status=413)
    try:
        plan = endpoints_for_request(models=[entity_model()], limits=limits)  # the text goes where the caller's may
    except GatewayError as error:
        if error.status == 403:  # the caller's guardrails allow the entity model no endpoint: say so
            raise
        raise GatewayError(MSG_ENTITY_CHECK.format(model=entity_model()), status=503) from None
    probe = CanonicalRequest(
        model="",
        instructions=entity_instructions(slugs),
        input=(Message(role="user", content=(TextPart(joined),)),),
        temperature=0,
    )
    sequence = AttemptSequence(
        candidates=plan.candidates,
        request_for=lambda candidate: replace(probe, model=candidate.endpoint.upstream_model),
    )
    try:
        served = sequence.call()
        said = "".join(getattr(item, "text", "") or "" for item in served.response.output)
        cost = usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
        return {index: entity_spans(item.text, said, slugs) for index, item in enumerate(texts)}, cost
    except (AttemptsFailed, ValueError):
        raise GatewayError(MSG_ENTITY_CHECK.format(model=entity_model()), status=503) from None
