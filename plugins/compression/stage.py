"""The `context-compression` plugin (engine `middle-out`): an input longer than the context of every endpoint of
the requested models is cut from the middle until it fits the widest of them, then routed. Kept: the system and
developer messages and `instructions`, the start and the end of the conversation; a function call and its
output go (or stay) together, with the reasoning item that precedes them. When removing whole turns is not
enough, the longest remaining texts lose their middle.

On when the request (or the account's default) turns it on, and by default when every endpoint of the requested
models has a context of DEFAULT_ON_CONTEXT tokens or less; `enabled: false` keeps the 400
`context_length_exceeded` that routing answers for an input no endpoint can hold.

Tokens are counted with the gateway's own estimate (4 characters a token, 1,000 an image), the one routing
compares with each endpoint's context: no tokenizer is a dependency of the gateway, and a count routing does not
share would let through an input routing then refuses. The pipeline entry says so (`data.tokenizer`)."""

import json
from dataclasses import dataclass, replace

from plugins.common.config import plugin_mentioned, plugin_settings
from routing.canonical import (
    CanonicalRequest,
    FunctionCall,
    FunctionCallOutput,
    ImagePart,
    Item,
    Message,
    Reasoning,
    TextPart,
)
from routing.selectors import endpoints_for_model
from routing.stages import RequestContext, Staged, StageEntry

PLUGIN_ID = "context-compression"
DEFAULT_ON_CONTEXT = 8_192
TOKENIZER = "estimate"  # responses_api.normalize.estimate_tokens: 4 characters a token, 1,000 an image
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_000
TRUNCATION_MARK = "\n[... {count} characters removed by context-compression ...]\n"
MIN_KEPT_CHARS = 200  # a truncated text keeps at least this much of its start and end


@dataclass(frozen=True, slots=True)
class Size:
    """An item's (or a group's) weight in the estimate: characters and images."""

    chars: int = 0
    images: int = 0

    def __add__(self, other: "Size") -> "Size":
        return Size(self.chars + other.chars, self.images + other.images)

    def __sub__(self, other: "Size") -> "Size":
        return Size(self.chars - other.chars, self.images - other.images)

    @property
    def tokens(self) -> int:
        return self.chars // CHARS_PER_TOKEN + self.images * IMAGE_TOKENS + 1


class ContextCompressionStage:
    type = "request_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged:
        settings = plugin_settings(ctx, PLUGIN_ID)
        if settings is None and plugin_mentioned(ctx, PLUGIN_ID):
            return Staged(request=request)  # enabled: false
        contexts = [e.context_length for model in ctx.models for e in endpoints_for_model(model_id=model)]
        by_default = settings is None
        if not contexts or (by_default and not all(0 < context <= DEFAULT_ON_CONTEXT for context in contexts)):
            return Staged(request=request)  # off (or no endpoint: routing answers)
        widest = max(contexts)
        if widest <= 0:
            return Staged(request=request)  # no known context: nothing to fit
        target = widest - min(request.max_output_tokens or 0, widest // 2)  # room for the answer
        fixed = _fixed_size(request)
        sizes = [_item_size(item) for item in request.input]
        before = sum(sizes, fixed)
        if before.tokens <= target:
            return Staged(request=request)  # fits: nothing to do, no entry
        items, removed, truncated = middle_out(list(request.input), sizes, fixed=fixed, target=target)
        compressed = replace(request, input=tuple(items))
        after = sum((_item_size(item) for item in items), fixed)
        figures = {
            "engine": "middle-out",
            "tokenizer": TOKENIZER,
            "messages_removed": removed,
            "messages_truncated": truncated,
            "tokens_removed": before.tokens - after.tokens,
            "tokens_before": before.tokens,
            "tokens_after": after.tokens,
            "context_length": target,
            "by_default": by_default,
        }
        summary = "compressed" if after.tokens <= target else "compressed: still longer than every context"
        entry = StageEntry(type=self.type, name=self.name, outcome=summary, data=figures)
        return Staged(request=compressed, entries=(entry,), record={"plugins": {PLUGIN_ID: figures}})


def _fixed_size(request: CanonicalRequest) -> Size:
    """What compression never touches: the instructions and the tool definitions."""
    chars = len(request.instructions or "")
    if request.tools:
        chars += len(json.dumps([(t.name, t.description, t.parameters) for t in request.tools]))
    return Size(chars=chars)


def _item_size(item: Item) -> Size:
    if isinstance(item, Message):
        size = Size()
        for part in item.content:
            if isinstance(part, TextPart):
                size += Size(chars=len(part.text))
            elif isinstance(part, ImagePart):
                size += Size(images=1)
            else:
                size += Size(chars=len(part.file_data or "") // 3)
        return size
    if isinstance(item, FunctionCall):
        return Size(chars=len(item.arguments) + len(item.name))
    if isinstance(item, FunctionCallOutput):
        return Size(chars=len(item.output))
    return Size(chars=sum(map(len, item.summary + item.content)))


def _protected(item: Item) -> bool:
    return isinstance(item, Message) and item.role in ("system", "developer")


def turns(items: list[Item]) -> list[range]:
    """The input cut into the groups that go or stay together: one item each, except that a function call and
    its output, and everything between them, form one group, and a reasoning item joins the item after it."""
    joined = [0] * (len(items) + 1)  # joined[i] > 0: item i and item i + 1 are in one group
    calls = {item.call_id: index for index, item in enumerate(items) if isinstance(item, FunctionCall)}
    for index, item in enumerate(items):
        if isinstance(item, FunctionCallOutput) and calls.get(item.call_id, index) < index:
            joined[calls[item.call_id]] += 1
            joined[index] -= 1
    groups, start, open_spans = [], 0, 0
    for index, item in enumerate(items):
        open_spans += joined[index]
        if index + 1 < len(items) and (open_spans > 0 or isinstance(item, Reasoning)):
            continue
        groups.append(range(start, index + 1))
        start = index + 1
    return groups


def middle_out(items: list[Item], sizes: list[Size], *, fixed: Size, target: int) -> tuple[list[Item], int, int]:
    """The items without their middle groups (nearest the middle first) until the estimate fits `target`;
    then, if needed, the longest texts left lose their middle. Returns (items, items removed, items truncated)."""
    groups = turns(items)
    total = sum(sizes, fixed)
    open_groups = [group for group in groups if not any(_protected(items[i]) for i in group)]
    removable = open_groups[1:-1]  # the start (first turn after the system prompt) and the end stay
    middle = (len(removable) - 1) / 2
    dropped: set[int] = set()
    for group in _by_middle(removable, middle):
        if total.tokens <= target:
            break
        dropped.update(group)
        total -= sum((sizes[i] for i in group), Size())
    kept = [item for index, item in enumerate(items) if index not in dropped]
    kept_sizes = [size for index, size in enumerate(sizes) if index not in dropped]
    truncated = 0
    if total.tokens > target:
        kept, truncated = _truncate_longest(kept, kept_sizes, excess=(total.tokens - target) * CHARS_PER_TOKEN)
    return kept, len(dropped), truncated


def _by_middle(groups: list[range], middle: float) -> list[range]:
    return [group for _, group in sorted(enumerate(groups), key=lambda pair: (abs(pair[0] - middle), pair[0]))]


def _truncate_longest(items: list[Item], sizes: list[Size], *, excess: int) -> tuple[list[Item], int]:
    """Cut `excess` characters out of the middle of the longest texts (user, assistant and tool outputs; never
    the system prompt, a call's arguments or the last item when anything else can give)."""
    order = sorted(
        (index for index, item in enumerate(items) if not _protected(item) and _text_of(item)),
        key=lambda index: (index == len(items) - 1, -sizes[index].chars),
    )
    truncated = 0
    for index in order:
        if excess <= 0:
            break
        text = _text_of(items[index])
        room = len(text) - 2 * MIN_KEPT_CHARS
        mark_len = len(TRUNCATION_MARK.format(count=len(text)))
        if room <= mark_len:
            continue
        cut = min(room, excess + mark_len)
        head = (len(text) - cut) // 2
        shortened = text[:head] + TRUNCATION_MARK.format(count=cut) + text[head + cut :]
        items[index] = _with_text(items[index], shortened)
        excess -= len(text) - len(shortened)
        truncated += 1
    return items, truncated


def _longest_part(item: Message) -> int:
    texts = [(len(part.text), index) for index, part in enumerate(item.content) if isinstance(part, TextPart)]
    return max(texts)[1] if texts else -1


def _text_of(item: Item) -> str:
    """The text compression may shorten: a tool output, or a message's longest text part."""
    if isinstance(item, FunctionCallOutput):
        return item.output
    if isinstance(item, Message) and (index := _longest_part(item)) >= 0:
        part = item.content[index]
        assert isinstance(part, TextPart)
        return part.text
    return ""


def _with_text(item: Item, text: str) -> Item:
    if isinstance(item, FunctionCallOutput):
        return replace(item, output=text)
    assert isinstance(item, Message)  # _text_of chose it
    index = _longest_part(item)
    content = list(item.content)
    content[index] = replace(content[index], text=text)  # type: ignore[arg-type]
    return replace(item, content=tuple(content))
