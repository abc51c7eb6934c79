"""The guardrail pre-stage: before routing, on every inference request (JSON and stream), the caller's
guardrails (the key's, the member's, else the workspace default: guardrails.selectors) are applied.

- Content: every text the model receives is scanned by each guardrail's filters (guardrails.content): first the
  caller's (instructions, each message's text parts, adjacent ones also joined, the text of the file annotations
  an answer sent back carries (the file-parser uses it instead of the file), file names, function call names and
  arguments, tool outputs, tool names, descriptions and schemas, the text of text files: guardrails.filetext);
  then, in a second pass after the web plugin and the file-parser (AddedTextGuardrailStage), the text they added;
  a file still sent as it is whose text could not be read is refused there (image data is not text). A name
  cannot be redacted: a redact match in one refuses the request like a block. A
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
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from gateway.accounts.authentication import Caller
from gateway.billing.services import ReservationHandle, SpendCap, SpendCapExceeded, hold_drop, spend_caps_check
from gateway.errors import GatewayError
from guardrails.content import (
    ACTION_RANK,
    REDACTION_TEMPLATE,
    ContentPolicy,
    EntitySpan,
    Scan,
    entity_instructions,
    entity_model,
    entity_spans,
    policy_combine,
    policy_for,
)
from guardrails.filetext import file_text
from guardrails.scanning import scan_budget_check
from guardrails.selectors import GuardrailRule, guardrail_generations, guardrails_for_caller, period_bounds
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import (
    CanonicalRequest,
    FilePart,
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
from routing.selection import endpoints_for_request, unservable
from routing.side_calls import bound_for, call_hold, call_worst
from routing.stages import Block, RequestContext, Staged, StageEntry, ToolResultScan

SUMMARY = {"block": "blocked", "redact": "redacted", "flag": "flagged", None: "passed"}
# The routers whose model calls read the request as it is, files included, before the file-parser and the second
# pass run (the fusion panel: plugins.routing_plugins.fusion). With content filters in force, a file the first pass
# cannot read is refused before them. The auto-router's classifier reads only the text parts (scanned in the first
# pass), the pareto router calls no model.
PANEL_ROUTERS = frozenset({"gateway/fusion"})
MAX_ENTITY_TEXT_CHARS = 100_000  # the text sent to the entity model for person names and addresses
ENTITY_OUTPUT_TOKENS = 4096  # the entity model's answer at most (its JSON lists; a cut one is a 503, never a pass)
MSG_ENTITY_TOO_LONG = (
    "A guardrail's person-name or address check reads at most {limit} characters of text and this request has more"
)
MSG_ENTITY_CHECK = (
    "A guardrail's person-name or address check could not run ({model} did not answer usably): the request "
    "was not sent unchecked; try again"
)
MSG_ENTITY_UNSERVED = (
    "A guardrail's person-name or address check cannot run: its model {model} is not served by this gateway "
    "({why}); the request was not sent unchecked, and retrying does not help"
)


Setter = Callable[[CanonicalRequest, str], CanonicalRequest]


@dataclass(frozen=True, slots=True)
class _Text:
    """One text of the request and how to put a changed one back. `put` None: a name (a tool's, a function
    call's), which cannot be redacted: the model would call a tool that is not the caller's. `run`: adjacent text
    parts of one message, joined (`text`) as the model reads them: where each part ends in it, and its setter."""

    text: str
    put: Setter | None
    run: tuple[tuple[int, Setter], ...] = ()

    def redact(self, request: CanonicalRequest, scan: Scan) -> CanonicalRequest:
        if self.put is None:  # a name with a redact match refuses the request (_block)
            return request
        if not self.run:
            redacted = scan.redacted()
            return request if redacted == self.text else self.put(request, redacted)
        start = 0
        for (end, put), redacted in zip(self.run, _redacted_parts(scan, [end for end, _ in self.run]), strict=True):
            if redacted != self.text[start:end]:
                request = put(request, redacted)
            start = end
        return request


class GuardrailStage:
    """The caller's text, before anything paid runs. `added`: the second pass (AddedTextGuardrailStage)."""

    type = "guardrail"
    name = "guardrails"
    plugin_ids: tuple[str, ...] = ()
    added = False

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        rules = _rules(ctx.caller)
        if not rules:
            return Staged(request)
        policies = [policy_for(*rule.policy_inputs()) for rule in rules]
        caps: tuple[SpendCap, ...] = ()
        if self.added:
            if not policy_combine(policies).rules:  # no content filters: nothing to read
                return Staged(request)
            try:
                texts = list(self.collect(request))
            except _Unreadable as file:
                return _unreadable(rules, policies, file.name)
            if not texts:
                return Staged(request)
        else:
            caps = _caps(rules, ctx.caller)
            if caps:  # a spent budget refuses before anything paid runs (the entity model here, later stages' engines)
                try:
                    spend_caps_check(caps, account_id=ctx.caller.account_id, api_key_id=ctx.caller.key_id)
                except SpendCapExceeded as spent:
                    return Block(spent.message, status=403)
            texts = list(_texts(request))
            if block := _prompt_block(rules, policies, ctx):
                return block
            if ctx.models and ctx.models[0] in PANEL_ROUTERS and policy_combine(policies).rules:
                if (unread := _unreadable_file(request)) is not None:  # the panel would read it unscanned
                    return _unreadable(rules, policies, unread, MSG_UNREADABLE_FOR_PANEL)
        # Never a partial scan: text over a guardrail's or the request's scanned-bytes budget is a 413 before any.
        scanning = [rule.name for rule, policy in zip(rules, policies, strict=True) if policy.scans_text]
        prescan = bool(policy_combine(policies).entity_slugs)  # the patterns read the texts before the entity model
        scan_budget_check(texts=_scanned(texts), guardrails=scanning, prescan=prescan)
        entities: dict[int, tuple[EntitySpan, ...]] = {}
        cost = Decimal(0)
        holds: tuple[ReservationHandle, ...] = ()  # the entity model call's (the request's own takes it over)
        if policy_combine(policies).entity_slugs:
            # A block the patterns find refuses before the text goes to the entity model.
            scans = [[_scan(policy, t) for t in texts] for policy in policies]
            if block := _block(rules, policies, scans, texts):
                return self._own(block)
            # its call is held first, within the budgets of this pass and the ones before (ctx.caps)
            found = _entities(policy_combine(policies), texts, _limits(rules), replace(ctx, caps=ctx.caps + caps))
            if isinstance(found, Block):
                return self._own(found)
            entities, cost, holds = found
        scans = [[_scan(policy, t, entities.get(i, ())) for i, t in enumerate(texts)] for policy in policies]
        entries = _costed(tuple(map(_entry, rules, policies, scans)), policies, cost)
        if block := _block(rules, policies, scans, texts, entries):
            # the entity model's call ran: charged with the refusal, out of its hold
            return self._own(replace(block, cost_usd=cost, holds=holds))
        if any(_patterns(rule_scans, "redact") for rule_scans in scans):
            # One guardrail: its scans are the combined ones; several: their filters together, once more.
            combined = scans[0] if len(policies) == 1 else None
            policy = policy_combine(policies)
            for index, text in enumerate(texts):
                scan = combined[index] if combined else _scan(policy, text, entities.get(index, ()))
                request = text.redact(request, scan)
        if self.added:  # the first pass listed every guardrail: this one adds those that found something
            entries = tuple(entry for entry in entries if entry.data["detected"] or entry.cost_usd)
            return Staged(request, entries=entries, cost_usd=cost, holds=holds)
        return Staged(request, entries=entries, limits=_limits(rules), caps=caps, cost_usd=cost, holds=holds)

    def _own(self, block: Block) -> Block:
        """A block of the second pass lists only the guardrails that found something (the first listed them all)."""
        if not self.added:
            return block
        return replace(block, entries=tuple(entry for entry in block.entries if entry.data["detected"]))

    @staticmethod
    def collect(request: CanonicalRequest) -> Iterator["_Text"]:
        """The texts a pass after the first reads (the first reads every text: _texts)."""
        return _added_texts(request)

    def tool_results(self, ctx: RequestContext) -> ToolResultScan | None:
        """The scan of what the server-tool loop hands the model in a later round (responses_api gives it to the
        loop: plugins do not import guardrails), None when no content filter applies: ToolResultGuardrailStage
        with the request's context (its budgets for an entity model's hold)."""
        if self.added:
            return None
        policies = [policy_for(*rule.policy_inputs()) for rule in _rules(ctx.caller)]
        if not policy_combine(policies).rules:
            return None
        scan = ToolResultGuardrailStage()
        return lambda request: scan(request, ctx)


class AddedTextGuardrailStage(GuardrailStage):
    """The second pass, after the stages that add text the model reads (placed after the web plugin and the
    file-parser in settings.PIPELINE_PRE_STAGES): the parsed text of each file and the web results (search prompt
    included) are scanned like the caller's text before anything else reads them, and a file that still goes to
    the provider as it is is read here: a text file's text is scanned (and redacted in the file), and a file whose
    text the gateway cannot read (a PDF, an image, a URL or a provider's file id) is refused while content filters
    apply, rather than sent unscanned."""

    name = "guardrails (added text)"
    added = True


class ToolResultGuardrailStage(GuardrailStage):
    """What a server tool's call hands the model in the loop's next round (plugins.server_tools): its result (a
    fetched page, search results, a fusion panel's answers, the definitions tool_search found) and the tools it
    found, declared from then on. Scanned like the caller's text before the round is sent: a block refuses the
    request (nothing more goes upstream), a redaction is what the model reads, a redact match in a found tool's
    name refuses."""

    name = "guardrails (server tool results)"
    added = True

    @staticmethod
    def collect(request: CanonicalRequest) -> Iterator["_Text"]:
        return _texts(request)


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
    texts: list[_Text],
    entries: tuple[StageEntry, ...] | None = None,
) -> Block | None:
    entries = entries if entries is not None else tuple(map(_entry, rules, policies, scans))
    names = [index for index, text in enumerate(texts) if text.put is None]
    for rule, rule_scans in zip(rules, scans, strict=True):
        blocked = _patterns(rule_scans, "block")
        # A redaction in a name would send the model a tool that is not the caller's: refused instead.
        in_names = [label for label in _patterns([rule_scans[i] for i in names], "redact") if label not in blocked]
        if blocked or in_names:
            why = f"the input matched {', '.join(blocked)}" if blocked else ""
            if in_names:
                named = (
                    f"a tool or function name or a hosted tool's definition matched {', '.join(in_names)}, "
                    "and neither can be redacted"
                )
                why = f"{why}; {named}" if why else named
            return Block(
                f"Request blocked by guardrail {rule.name}: {why}",
                status=403,
                metadata={"patterns": list(blocked) + in_names},
                error_type=ErrorType.CONTENT_POLICY_VIOLATION,
                entries=entries,
            )
    return None


def _prompt_block(rules: list[GuardrailRule], policies: list[ContentPolicy], ctx: RequestContext) -> Block | None:
    """A block in the `search_prompt` of the request's web plugin entry refuses before the search is paid for. Its
    redactions and flags are the second pass's: the prompt reaches the model in the web results' text part."""
    prompts = [
        _Text(entry["search_prompt"], _unchanged)
        for entry in ctx.plugins
        if entry.get("id") == "web" and isinstance(entry.get("search_prompt"), str) and entry["search_prompt"]
    ]
    if not prompts:
        return None
    scans = [[_scan(policy, prompt) for prompt in prompts] for policy in policies]
    blocks = [[scan for scan in rule_scans if scan.action == "block"] for rule_scans in scans]
    return _block(rules, policies, blocks, prompts) if any(blocks) else None


def _unchanged(request: CanonicalRequest, new: str) -> CanonicalRequest:
    return request


def _scan(policy: ContentPolicy, text: _Text, entities: tuple[EntitySpan, ...] = ()) -> Scan:
    """The policy's matches in one text. A run of text parts is scanned joined (a word split across two parts is
    one word to the model) and part by part (a pattern anchored at a part's start or end), the matches together."""
    scan = policy.scan(text.text, entities)
    if not text.run:
        return scan
    matches = list(scan.matches)
    start = 0
    for end, _ in text.run:
        found = policy.scan(text.text[start:end]).matches
        matches.extend(match._replace(start=match.start + start, end=match.end + start) for match in found)
        start = end
    return Scan(text.text, tuple(dict.fromkeys(matches)))


def _redacted_parts(scan: Scan, ends: list[int]) -> list[str]:
    """Each part of a run (`ends`: where each ends in the joined text) with its redactions: a region is replaced
    in the part where it starts, and the rest of it is taken out of the parts it reaches into."""
    regions = [region for region in scan.regions if region.action == "redact"]
    parts: list[str] = []
    start = 0
    for end in ends:
        pieces: list[str] = []
        cursor = start
        for region in regions:
            if region.end <= start or region.start >= end:
                continue
            pieces.append(scan.text[cursor : max(region.start, start)])
            if region.start >= start:
                pieces.append(REDACTION_TEMPLATE.format(label=region.redaction_label))
            cursor = min(region.end, end)
        pieces.append(scan.text[cursor:end])
        parts.append("".join(pieces))
        start = end
    return parts


def _texts(request: CanonicalRequest) -> Iterator[_Text]:
    if request.instructions:
        yield _Text(request.instructions, lambda r, new: replace(r, instructions=new))
    for index, item in enumerate(request.input):
        match item:
            case Message():
                yield from _message_texts(index, item)
            case FunctionCallOutput():
                yield _Text(item.output, _item_setter(index, "output"))
            case FunctionCall():
                yield _Text(item.name, None)  # the model reads the name of the call it made
                yield _Text(item.arguments, _item_setter(index, "arguments"))
            case Reasoning():  # a replayed reasoning item's text is sent on (OpenAI summaries, Anthropic thinking)
                for name in ("summary", "content"):
                    for text_index, text in enumerate(getattr(item, name)):
                        if text:
                            yield _Text(text, _reasoning_setter(index, name, text_index))
    yield from _tool_texts(request)
    for path, text in _strings(request.text_format, ()):  # a structured output's schema is read like a tool's
        yield _Text(text, _format_setter(path))


def _message_texts(index: int, message: Message) -> Iterator[_Text]:
    """A message's text parts (adjacent ones as one run: the model reads them one after the other), the text of
    the file annotations they carry, and each file's name (the provider passes it on, the file-parser writes it
    above the file's text)."""
    run: list[tuple[str, Setter]] = []
    for part_index, part in enumerate([*message.content, None]):
        if isinstance(part, TextPart):
            if part.text:
                run.append((part.text, _part_setter(index, part_index)))
            continue
        if len(run) == 1:
            yield _Text(run[0][0], run[0][1])
        elif run:
            ends = itertools.accumulate(len(text) for text, _ in run)
            puts = (put for _, put in run)
            yield _Text("".join(text for text, _ in run), run[0][1], tuple(zip(ends, puts, strict=True)))
        run = []
        if isinstance(part, FilePart):
            if part.filename:
                yield _Text(part.filename, _file_setter(index, part_index, "filename"))
            # A text file's text is the caller's: read before any stage does (a router's panel runs before the
            # file-parser), redacted in the file itself. Files it cannot read are the second pass's.
            if (read := file_text(part)) is not None and read[0]:
                yield _Text(read[0], _file_setter(index, part_index, "file_data", read[1]))
    for part_index, part in enumerate(message.content):
        if isinstance(part, TextPart):
            yield from _annotation_texts(index, part_index, part)


class _Unreadable(Exception):
    """A file that goes to the provider as it is and whose text the gateway cannot read (guardrails.filetext)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


MSG_UNREADABLE_FILE = (
    "Request blocked by guardrail {guardrail}: the file '{name}' would reach the model as it is, where its content "
    'filters cannot read it; have the gateway read it first (plugins: [{{"id": "file-parser", "pdf": '
    '{{"engine": "pdf-text"}}}}]) or send its text'
)


MSG_UNREADABLE_FOR_PANEL = (
    "Request blocked by guardrail {guardrail}: the file '{name}' would reach the router's panel as it is, before "
    "the file-parser, where its content filters cannot read it; send its text, or ask a model by name to have the "
    "file-parser read it"
)


def _unreadable_file(request: CanonicalRequest) -> str | None:
    """The name of the first file that goes to the provider as it is and whose text the gateway cannot read."""
    try:
        for _ in _added_texts(request):
            pass
    except _Unreadable as file:
        return file.name
    return None


def _scanned(texts: list[_Text]) -> Iterator[str]:
    """What the filters read, for the scanned-bytes budget: each text, and a run of text parts once more, part by
    part (_scan reads it joined and part by part). The budget counts each text's folded views (guardrails.scanning:
    a text with look-alike letters is read in two views, and a folded view may be longer than the text)."""
    for text in texts:
        yield text.text
        start = 0
        for end, _ in text.run:
            yield text.text[start:end]
            start = end


def _added_texts(request: CanonicalRequest) -> Iterator[_Text]:
    """The texts the pre-stages before the second pass added: a text part of a caller's message that carries an
    annotation (a parsed file's, the web results': the caller's own input_text carries none, only an answer's
    output_text sent back does, and the first pass read that). A file that still goes as it is and is not a text
    file the first pass read raises _Unreadable."""
    for index, item in enumerate(request.input):
        if not isinstance(item, Message):
            continue
        for part_index, part in enumerate(item.content):
            if isinstance(part, TextPart) and part.annotations and part.text and item.role != "assistant":
                yield _Text(part.text, _part_setter(index, part_index))
            elif isinstance(part, FilePart) and file_text(part) is None:  # a text file: the first pass read it
                raise _Unreadable(part.filename or part.file_url or "input_file")


def _unreadable(
    rules: list[GuardrailRule], policies: list[ContentPolicy], name: str, message: str = MSG_UNREADABLE_FILE
) -> Block:
    rule = next(rule for rule, policy in zip(rules, policies, strict=True) if policy.rules)
    return Block(
        message.format(guardrail=rule.name, name=name[:200]),
        status=403,
        error_type=ErrorType.CONTENT_POLICY_VIOLATION,
    )


def _file_setter(index: int, part_index: int, field: str, encode: Callable[[str], str] | None = None) -> Setter:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        value = encode(new) if encode is not None else new
        parts[part_index] = replace(parts[part_index], **{field: value})  # type: ignore[arg-type]  # a FilePart
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put


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
    """Tool definitions are text the model reads: each name and description, and the strings and property names
    of each parameter schema; and each string of a hosted tool's definition (an MCP server's label and
    description, allowed tool names, ...), which cannot be redacted: the provider acts on the definition, and a
    changed one is another tool (a redact match refuses, like one in a name)."""
    for index, tool in enumerate(request.tools):
        yield _Text(tool.name, None)
        if tool.description:
            yield _Text(tool.description, _tool_setter(index, ()))
        for path, text in _strings(tool.parameters, ()):
            yield _Text(text, _tool_setter(index, path))
    for hosted in request.hosted_tools:
        for key, value in hosted.spec.items():
            if key not in HOSTED_UNREAD:
                yield from (_Text(text, None) for _, text in _strings(value, ()))


# What of a hosted tool's definition is not scanned: its type (the vocabulary), and the credentials the provider
# sends to an MCP server (the model never reads them; a guardrail pattern matching a token would refuse the tool).
HOSTED_UNREAD = frozenset({"type", "headers", "authorization"})


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
    policy: ContentPolicy, texts: list[_Text], limits: tuple[RoutingLimit, ...], ctx: RequestContext
) -> tuple[dict[int, tuple[EntitySpan, ...]], Decimal, tuple[ReservationHandle, ...]] | Block:
    """Person names and addresses, found by the configured entity model (one call for all the texts), what
    that call cost at the list price of the endpoint that served it ({} and 0 when no guardrail asks for them), and
    its hold: the call is held before it runs (routing.side_calls.call_hold: the credits, the key's limit, the
    budgets in ctx.caps) and billed at most that (what was sent, ENTITY_OUTPUT_TOKENS out). A guardrail cannot ask
    without the model configured (refused at creation), and a request whose entity check cannot run is refused
    rather than let through unchecked (a Block: what the call cost is charged out of its hold)."""
    slugs = policy.entity_slugs
    if not slugs or not texts:
        return {}, Decimal(0), ()
    joined = "\n\n".join(text.text for text in texts)
    if len(joined) > MAX_ENTITY_TEXT_CHARS:  # the model would not see the rest: refused, not let through unchecked
        raise GatewayError(MSG_ENTITY_TOO_LONG.format(limit=MAX_ENTITY_TEXT_CHARS), status=413)
    try:
        plan = endpoints_for_request(models=[entity_model()], limits=limits)  # the text goes where the caller's may
    except GatewayError as error:
        if error.status == 403:  # the caller's guardrails allow the entity model no endpoint: say so
            raise
        # the deployment's configuration (no endpoint, no credential for it): a retry cannot help
        message = MSG_ENTITY_UNSERVED.format(model=entity_model(), why=error.message)
        raise unservable(message, models=[entity_model()], cause=error) from None
    probe = CanonicalRequest(
        model="",
        instructions=entity_instructions(slugs),
        input=(Message(role="user", content=(TextPart(joined),)),),
        temperature=0,
        max_output_tokens=ENTITY_OUTPUT_TOKENS,
    )
    hold = call_hold(ctx, call_worst(plan, probe), label="guardrail entity model")
    if isinstance(hold, GatewayError):  # the credits or a budget cannot cover it: it never runs
        return Block(hold.message, status=hold.status, metadata=hold.metadata or None)
    sequence = AttemptSequence(
        candidates=plan.candidates,
        request_for=lambda candidate: replace(probe, model=candidate.endpoint.upstream_model),
        bound_usage=bound_for(probe),
    )
    cost = Decimal(0)
    try:
        served = sequence.call()
        said = "".join(getattr(item, "text", "") or "" for item in served.response.output)
        cost = usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
        return {index: entity_spans(item.text, said, slugs) for index, item in enumerate(texts)}, cost, (hold,)
    except (AttemptsFailed, ValueError):
        failed = MSG_ENTITY_CHECK.format(model=entity_model())
        return Block(failed, status=503, error_type=ErrorType.PROVIDER_UNAVAILABLE, cost_usd=cost, holds=(hold,))
    except BaseException:
        hold_drop(hold)
        raise
