"""The most output one upstream answer may bring, whatever the provider does with the request's maximum: a
broken or hostile provider can ignore `max_output_tokens: 16` and stream megabytes, which would be relayed,
repeated in every `*.done` event and held in memory until the stream ends.

The bound is OUTPUT_BYTES_PER_TOKEN UTF-8 bytes per output token the request allows (twice the ~4 bytes of an
average token), at least MIN_OUTPUT_BYTES (a few long tokens under a tiny maximum), counted over everything the
model writes: message text and refusals, reasoning (summary and content), function call ids, names and
arguments, and the provider's annotations (each delta at least one byte, so empty ones cannot flood either);
token logprobs only when the request asked for them, at most twice as many as the tokens allowed, each with at
most MAX_TOP_LOGPROBS alternatives. The tokens allowed (`output_allowance`) are the request's
`max_output_tokens`, else the endpoint's maximum completion tokens, else its context length (as the usage bounds
assume), plus the thinking budget a reasoning request adds upstream. An answer that reaches the bound is cut
there (a stream stops being read) and ends incomplete for `max_output_tokens`, as a provider's own cut at the
maximum does, marked `output_cut` (its usage is then billed as the tokens the request allowed, which the credit
hold covers: responses_api.service).

What the token bound does not measure has its own: the items of tools the provider ran itself (web_search_call,
code interpreter output, image generation results, MCP call outputs, ...) and reasoning signatures and encrypted
content share OPAQUE_OUTPUT_BYTES per answer (IMAGE_OUTPUT_BYTES when the request offers image generation: an
image is megabytes of base64), each at least OPAQUE_ITEM_MIN_BYTES, so a hostile upstream cannot flood through
them either; one that does not fit is left out and the answer cut. Other items are at most one per ITEM_BYTES of
the bound (at least MIN_ITEMS), whatever their bytes."""

import json
from dataclasses import dataclass, replace

from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    HostedToolCall,
    OutputFunctionCall,
    OutputHostedTool,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    ReasoningDelta,
    ReasoningSealed,
    RefusalDelta,
    StreamEvent,
    TextAnnotated,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    ToolCallStarted,
)
from routing.catalog import EndpointInfo
from routing.providers.anthropic.request import EFFORT_BUDGET, MIN_THINKING_BUDGET
from routing.providers.hosted import IMAGE_GENERATION, capability, citation_within

OUTPUT_BYTES_PER_TOKEN = 8
MIN_OUTPUT_BYTES = 256
DEFAULT_OUTPUT_TOKENS = 4096  # what the credit hold assumes when neither the request nor the catalog names a maximum
MAX_TOP_LOGPROBS = 20  # the most alternatives a token's logprob may come with (OpenAI's maximum top_logprobs)
CUT_REASON = "max_output_tokens"
OPAQUE_OUTPUT_BYTES = 1024 * 1024  # provider-run items and reasoning seals, per answer
IMAGE_OUTPUT_BYTES = 8 * 1024 * 1024  # the same when the request offers image generation (a 1536x1024 PNG: ~4 MB)
# An output item (message, reasoning, function call) costs memory (~1 KB) and a few events whatever its bytes, so
# 1-byte items alternating would multiply them: an answer has at most one per ITEM_BYTES of its bound, at least
# MIN_ITEMS (a real answer has a few: parallel calls, a provider's searches with reasoning between them: tens).
ITEM_BYTES = 16
MIN_ITEMS = 64
OPAQUE_ITEM_MIN_BYTES = 512  # the least a provider-run item counts against its bound (its memory, not its JSON)


@dataclass(frozen=True, slots=True)
class OutputAllowance:
    """The output tokens a request allows on an endpoint: the one rule for the output bound, the credit hold and
    the usage bounds (responses_api.service)."""

    tokens: int  # the most the upstream may legitimately write: the output bound and the most usage plausible
    held: int  # what the credit hold covers, and a cut answer is billed: `tokens`, unless no maximum is named


def output_allowance(request: CanonicalRequest, endpoint: EndpointInfo) -> OutputAllowance:
    """The request's `max_output_tokens`, else the endpoint's maximum completion tokens, else its context length
    (held: DEFAULT_OUTPUT_TOKENS, the gateway's assumption), plus the thinking budget a reasoning request may add."""
    named = request.max_output_tokens or endpoint.max_completion_tokens
    thinking = _thinking_budget(request)
    return OutputAllowance(
        tokens=(named or endpoint.context_length or DEFAULT_OUTPUT_TOKENS) + thinking,
        held=(named or DEFAULT_OUTPUT_TOKENS) + thinking,
    )


def _thinking_budget(request: CanonicalRequest) -> int:
    """The tokens a reasoning request's thinking may add upstream: Anthropic and Bedrock requests raise the
    maximum by it (routing.providers.anthropic.request, bedrock.request); the most either adapter adds."""
    reasoning = request.reasoning
    if reasoning is None or reasoning.enabled is False or reasoning.effort == "none":
        return 0
    return max(
        MIN_THINKING_BUDGET,
        reasoning.max_tokens or 0,
        EFFORT_BUDGET.get(reasoning.effort or "medium", max(EFFORT_BUDGET.values())),
    )


def output_byte_limit(tokens: int) -> int:
    return max(OUTPUT_BYTES_PER_TOKEN * tokens, MIN_OUTPUT_BYTES)


def output_budget(request: CanonicalRequest, endpoint: EndpointInfo) -> "OutputBudget":
    """The budget of one attempt's answer."""
    images = any(capability(str(tool.spec.get("type"))) == IMAGE_GENERATION for tool in request.hosted_tools)
    opaque = IMAGE_OUTPUT_BYTES if images else OPAQUE_OUTPUT_BYTES
    return OutputBudget(output_allowance(request, endpoint).tokens, logprobs=request.logprobs, opaque=opaque)


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


class OutputBudget:
    """The bytes of output an answer has left. `take` spends them; once a text does not fit, the budget is
    `exhausted` and the answer must end there."""

    __slots__ = (
        "left",
        "exhausted",
        "logprobs",
        "logprobs_left",
        "logprob_bytes_left",
        "opaque_left",
        "items_left",
        "kind",
    )

    def __init__(self, tokens: int, *, logprobs: bool = False, opaque: int = OPAQUE_OUTPUT_BYTES) -> None:
        self.left = output_byte_limit(tokens)  # for the output tokens the request allows
        self.opaque_left = opaque  # for provider-run items and reasoning seals
        self.exhausted = False
        self.logprobs = logprobs  # asked for (else none is kept)
        self.logprobs_left = 2 * tokens
        self.logprob_bytes_left = self.left * (1 + MAX_TOP_LOGPROBS)  # a token's text and its alternatives'
        self.items_left = max(self.left // ITEM_BYTES, MIN_ITEMS)  # (provider-run items: their bound's floor)
        self.kind = ""  # the kind of the item a stream's events are building (as routing.accumulate.Fold opens them)

    def take(self, text: str) -> str:
        """The part of `text` that fits (all of it while there is room; never half a character)."""
        size = _size(text) or 1  # an empty delta is an event all the same
        if size <= self.left:
            self.left -= size
            return text
        kept = text.encode()[: max(self.left, 0)].decode("utf-8", errors="ignore")
        self.left -= len(kept.encode())
        self.exhausted = True
        return kept

    # ---- streams ----
    def event(self, event: StreamEvent) -> StreamEvent | None:
        """The event as far as it fits (None: nothing of it does). Events that carry no output pass as they are."""
        match event:
            case TextDelta():  # the hot path: most events of most answers
                if self.kind != "message" and not self._opens("message"):
                    return None
                text = event.text
                size = (len(text) if text.isascii() else len(text.encode())) or 1  # (take's, inlined)
                if size <= self.left and not event.logprobs:  # all of it fits
                    self.left -= size
                    return event
                return self._text_delta(event)
            case RefusalDelta() | ReasoningDelta():
                kind = "message" if isinstance(event, RefusalDelta) else "reasoning"
                if self.kind != kind and not self._opens(kind):
                    return None
                text = self.take(event.text)
                if text == event.text and not self.exhausted:
                    return event
                return replace(event, text=text) if text else None
            case ToolCallDelta():
                if self.kind != "function_call" and not self._opens("function_call"):  # (the fold opens one)
                    return None
                arguments = self.take(event.arguments)
                if arguments == event.arguments and not self.exhausted:
                    return event
                return ToolCallDelta(event.index, arguments) if arguments else None
            case HostedToolCall():  # an item the provider ran: whole or not at all
                self.kind = "hosted"
                return event if self._opaque(_item_size(event.call)) else None
            case ReasoningSealed():  # a signature or encrypted content: whole or not at all
                if self.kind != "reasoning" and not self._opens("reasoning"):
                    return None
                return event if self._opaque(_seal_size(event)) else None
            case ToolCallStarted():  # a call cut in its id or name: none of it
                if not self._opens("function_call"):
                    return None
                return event if self._whole(_size(str(event.call_id)) + _size(str(event.name))) else None
            case TextAnnotated():  # a cut annotation: none of it
                if self.kind != "message" and not self._opens("message"):
                    return None
                return event if self._whole(_size(json.dumps(event.annotation))) else None
        return event

    def _text_delta(self, event: TextDelta) -> TextDelta | None:
        text = self.take(event.text)
        logprobs = self._logprobs(event.logprobs)
        if text == event.text and logprobs is event.logprobs and not self.exhausted:
            return event
        if text != event.text:
            logprobs = _logprobs_within(logprobs, len(text))
        return TextDelta(text, logprobs) if text or logprobs else None

    def _opens(self, kind: str) -> bool:
        """Whether the stream may open another item (of `kind`); past `items_left` the answer is cut."""
        if self.items_left < 1:
            self.exhausted = True
            return False
        self.items_left -= 1
        self.kind = kind
        return True

    def _whole(self, size: int) -> bool:
        """Whether `size` bytes of output fit whole (spent when they do; cut when not)."""
        if size > self.left:
            self.left, self.exhausted = 0, True
            return False
        self.left -= size
        return True

    def _opaque(self, size: int) -> bool:
        """Whether `size` bytes of provider-run items or reasoning seals fit (spent when they do; cut when not)."""
        if size > self.opaque_left:
            self.opaque_left, self.exhausted = 0, True
            return False
        self.opaque_left -= size
        return True

    def _logprobs(self, logprobs: tuple[TokenLogprob, ...]) -> tuple[TokenLogprob, ...]:
        """The token logprobs that fit (the same tuple when all do); past the budget the answer is cut."""
        if not logprobs:
            return logprobs
        if not self.logprobs:  # not asked for: not kept, not relayed
            return ()
        kept, changed = [], False
        for token in logprobs:
            alternatives = token.top_logprobs
            if len(alternatives) > MAX_TOP_LOGPROBS:
                alternatives, changed = alternatives[:MAX_TOP_LOGPROBS], True
                token = replace(token, top_logprobs=alternatives)
            size = _size(token.token) + sum(_size(alternative.token) for alternative in alternatives)
            if self.logprobs_left < 1 or size > self.logprob_bytes_left:
                self.exhausted = changed = True
                break
            self.logprobs_left -= 1
            self.logprob_bytes_left -= size
            kept.append(token)
        return tuple(kept) if changed else logprobs

    # ---- whole answers ----
    def response(self, response: CanonicalResponse) -> CanonicalResponse:
        """A complete answer within the budget: its items as far as they fit, incomplete when cut."""
        kept: list[OutputItem] = []
        for whole in response.output:
            if not isinstance(whole, OutputHostedTool) and not self._opens(""):
                break
            item = self._item(whole)
            if self.exhausted:
                if item is not None and _has_output(item):
                    kept.append(item)
                break
            assert item is not None  # (left out only when the budget is spent)
            kept.append(item)
        if not self.exhausted:
            return response
        return replace(
            response,
            output=tuple(kept),
            status="incomplete",
            incomplete_reason=CUT_REASON,
            output_cut=True,
        )

    def _item(self, item: OutputItem) -> OutputItem | None:
        """The item as far as it fits (None: left out)."""
        match item:
            case OutputMessage():
                text = self.take(item.text)
                refusal = self.take(item.refusal) if item.refusal and not self.exhausted else None
                annotations = tuple(
                    note
                    for note in item.annotations
                    if citation_within(note, len(text)) and self._whole(_size(json.dumps(note)))
                )
                return replace(
                    item,
                    text=text,
                    refusal=refusal or None,
                    annotations=annotations,
                    logprobs=_logprobs_within(self._logprobs(item.logprobs), len(text)),
                )
            case OutputReasoning():
                summary = tuple(self.take(text) for text in item.summary)
                content = tuple(self.take(text) for text in item.content)
                sealed = ReasoningSealed(item.signature, item.encrypted_content, item.format)
                if not self._opaque(_seal_size(sealed)):  # its seal does not fit: the thinking is kept, its seal not
                    return replace(item, summary=summary, content=content, signature=None, encrypted_content=None)
                return replace(item, summary=summary, content=content)
            case OutputFunctionCall():
                if not self._whole(_size(str(item.call_id)) + _size(str(item.name))):  # (an upstream's: any type)
                    return replace(item, name="", arguments="")  # not even its id and name fit: left out
                return replace(item, arguments=self.take(item.arguments))
            case OutputHostedTool():
                return item if self._opaque(_item_size(item)) else None
        return item


def _seal_size(sealed: ReasoningSealed) -> int:
    return _size(sealed.signature or "") + _size(sealed.encrypted_content or "")


def _item_size(call: OutputHostedTool) -> int:
    """A provider-run item's bytes as relayed (its JSON; at least OPAQUE_ITEM_MIN_BYTES)."""
    return max(len(json.dumps(call.item, ensure_ascii=False).encode()), OPAQUE_ITEM_MIN_BYTES)


def _has_output(item: OutputItem) -> bool:
    match item:
        case OutputMessage():
            return bool(item.text or item.refusal)
        case OutputReasoning():
            return any(item.summary) or any(item.content)
        case OutputFunctionCall():
            return bool(item.name)
    return True


def _logprobs_within(logprobs: tuple[TokenLogprob, ...], length: int) -> tuple[TokenLogprob, ...]:
    """The tokens of a text cut to `length` characters: those wholly within it."""
    kept, used = [], 0
    for token in logprobs:
        used += len(token.token)
        if used > length:
            break
        kept.append(token)
    return tuple(kept)
