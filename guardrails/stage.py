"""The guardrail pre-stage: before routing, on every inference request (JSON and stream), the caller's
guardrails (the key's, the member's, else the workspace default: guardrails.selectors) are applied.

- Content: every text the model receives is scanned by each guardrail's filters (guardrails.policy): first the
  caller's (guardrails.texts: instructions, each message's text parts, adjacent ones also joined, the text of the
  file annotations an answer sent back carries (the file-parser uses it instead of the file), file names, function
  call names and arguments, tool outputs, tool names, descriptions and schemas, the text of text files);
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

from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal

from gateway.billing.services import ReservationHandle, SpendCap, SpendCapExceeded, hold_drop, spend_caps_check
from gateway.errors import GatewayError
from guardrails.detectors.entity import EntitySpan, entity_instructions, entity_model, entity_spans
from guardrails.limits import caller_rules, routing_limits, spend_caps
from guardrails.matches import ACTION_RANK, Scan
from guardrails.policy import ContentPolicy, policy_combine, policy_for
from guardrails.scan import scan_budget_check
from guardrails.selectors import GuardrailRule
from guardrails.setters import unchanged
from guardrails.texts import (
    RequestText,
    Unreadable,
    added_texts,
    request_texts,
    scanned_texts,
    text_scan,
    unreadable_file,
)
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import (
    CanonicalRequest,
    Message,
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
# pass run (the fusion panel: plugins.fusion.run). With content filters in force, a file the first pass
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


class GuardrailStage:
    """The caller's text, before anything paid runs. `added`: the second pass (AddedTextGuardrailStage)."""

    type = "guardrail"
    name = "guardrails"
    plugin_ids: tuple[str, ...] = ()
    added = False

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        rules = caller_rules(ctx.caller)
        if not rules:
            return Staged(request)
        policies = [policy_for(*rule.policy_inputs()) for rule in rules]
        caps: tuple[SpendCap, ...] = ()
        if self.added:
            if not policy_combine(policies).rules:  # no content filters: nothing to read
                return Staged(request)
            try:
                texts = list(self.collect(request))
            except Unreadable as file:
                return _unreadable(rules, policies, file.name)
            if not texts:
                return Staged(request)
        else:
            caps = spend_caps(rules, ctx.caller)
            if caps:  # a spent budget refuses before anything paid runs (the entity model here, later stages' engines)
                try:
                    spend_caps_check(caps, account_id=ctx.caller.account_id, api_key_id=ctx.caller.key_id)
                except SpendCapExceeded as spent:
                    return Block(spent.message, status=403)
            texts = list(request_texts(request))
            if block := _prompt_block(rules, policies, ctx):
                return block
            if ctx.models and ctx.models[0] in PANEL_ROUTERS and policy_combine(policies).rules:
                if (unread := unreadable_file(request)) is not None:  # the panel would read it unscanned
                    return _unreadable(rules, policies, unread, MSG_UNREADABLE_FOR_PANEL)
        # Never a partial scan: text over a guardrail's or the request's scanned-bytes budget is a 413 before any.
        scanning = [rule.name for rule, policy in zip(rules, policies, strict=True) if policy.scans_text]
        prescan = bool(policy_combine(policies).entity_slugs)  # the patterns read the texts before the entity model
        scan_budget_check(texts=scanned_texts(texts), guardrails=scanning, prescan=prescan)
        entities: dict[int, tuple[EntitySpan, ...]] = {}
        cost = Decimal(0)
        holds: tuple[ReservationHandle, ...] = ()  # the entity model call's (the request's own takes it over)
        if policy_combine(policies).entity_slugs:
            # A block the patterns find refuses before the text goes to the entity model.
            scans = [[text_scan(policy, t) for t in texts] for policy in policies]
            if block := _block(rules, policies, scans, texts):
                return self._own(block)
            # its call is held first, within the budgets of this pass and the ones before (ctx.caps)
            found = _entities(
                policy_combine(policies), texts, routing_limits(rules), replace(ctx, caps=ctx.caps + caps)
            )
            if isinstance(found, Block):
                return self._own(found)
            entities, cost, holds = found
        scans = [[text_scan(policy, t, entities.get(i, ())) for i, t in enumerate(texts)] for policy in policies]
        entries = _costed(tuple(map(_entry, rules, policies, scans)), policies, cost)
        if block := _block(rules, policies, scans, texts, entries):
            # the entity model's call ran: charged with the refusal, out of its hold
            return self._own(replace(block, cost_usd=cost, holds=holds))
        if any(_patterns(rule_scans, "redact") for rule_scans in scans):
            # One guardrail: its scans are the combined ones; several: their filters together, once more.
            combined = scans[0] if len(policies) == 1 else None
            policy = policy_combine(policies)
            for index, text in enumerate(texts):
                scan = combined[index] if combined else text_scan(policy, text, entities.get(index, ()))
                request = text.redact(request, scan)
        if self.added:  # the first pass listed every guardrail: this one adds those that found something
            entries = tuple(entry for entry in entries if entry.data["detected"] or entry.cost_usd)
            return Staged(request, entries=entries, cost_usd=cost, holds=holds)
        return Staged(request, entries=entries, limits=routing_limits(rules), caps=caps, cost_usd=cost, holds=holds)

    def _own(self, block: Block) -> Block:
        """A block of the second pass lists only the guardrails that found something (the first listed them all)."""
        if not self.added:
            return block
        return replace(block, entries=tuple(entry for entry in block.entries if entry.data["detected"]))

    @staticmethod
    def collect(request: CanonicalRequest) -> Iterator[RequestText]:
        """The texts a pass after the first reads (the first reads every text: request_texts)."""
        return added_texts(request)

    def tool_results(self, ctx: RequestContext) -> ToolResultScan | None:
        """The scan of what the server-tool loop hands the model in a later round (responses_api gives it to the
        loop: plugins do not import guardrails), None when no content filter applies: ToolResultGuardrailStage
        with the request's context (its budgets for an entity model's hold)."""
        if self.added:
            return None
        policies = [policy_for(*rule.policy_inputs()) for rule in caller_rules(ctx.caller)]
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
    def collect(request: CanonicalRequest) -> Iterator[RequestText]:
        return request_texts(request)


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
    texts: list[RequestText],
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
        RequestText(entry["search_prompt"], unchanged)
        for entry in ctx.plugins
        if entry.get("id") == "web" and isinstance(entry.get("search_prompt"), str) and entry["search_prompt"]
    ]
    if not prompts:
        return None
    scans = [[text_scan(policy, prompt) for prompt in prompts] for policy in policies]
    blocks = [[scan for scan in rule_scans if scan.action == "block"] for rule_scans in scans]
    return _block(rules, policies, blocks, prompts) if any(blocks) else None


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


def _unreadable(
    rules: list[GuardrailRule], policies: list[ContentPolicy], name: str, message: str = MSG_UNREADABLE_FILE
) -> Block:
    rule = next(rule for rule, policy in zip(rules, policies, strict=True) if policy.rules)
    return Block(
        message.format(guardrail=rule.name, name=name[:200]),
        status=403,
        error_type=ErrorType.CONTENT_POLICY_VIOLATION,
    )


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


def _entities(
    policy: ContentPolicy, texts: list[RequestText], limits: tuple[RoutingLimit, ...], ctx: RequestContext
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
