"""The canonical request, response and stream events that every provider adapter translates.

They follow the Responses API's vocabulary (our public API), so the Responses layer maps onto them
directly and each adapter only knows its own wire format.
"""

from dataclasses import dataclass, field
from typing import Any, Literal

# ---- request -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextPart:
    text: str
    cache_control: dict[str, Any] | None = None
    # An assistant's output_text sent back: its annotations; a file the file-parser turned into this text: the
    # file's annotation (what the answer carries so the caller can skip parsing it again). Adapters send text only.
    annotations: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ImagePart:
    url: str  # https URL or data: URL
    detail: str = "auto"
    cache_control: dict[str, Any] | None = None  # a prompt-cache breakpoint after this block (Anthropic's wire)


@dataclass(frozen=True)
class FilePart:
    filename: str | None = None
    file_data: str | None = None  # data: URL or base64
    file_url: str | None = None
    file_id: str | None = None
    cache_control: dict[str, Any] | None = None


Part = TextPart | ImagePart | FilePart


@dataclass(frozen=True)
class Message:
    role: Literal["user", "system", "developer", "assistant"]
    content: tuple[Part, ...]


@dataclass(frozen=True)
class FunctionCall:
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    cache_control: dict[str, Any] | None = None


@dataclass(frozen=True)
class FunctionCallOutput:
    call_id: str
    output: str
    cache_control: dict[str, Any] | None = None


@dataclass(frozen=True)
class Reasoning:
    """Replayed reasoning; a provider only accepts its own format's signature or encrypted content."""

    id: str | None = None
    summary: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    signature: str | None = None
    encrypted_content: str | None = None
    format: str | None = None


Item = Message | FunctionCall | FunctionCallOutput | Reasoning


@dataclass(frozen=True)
class HostedTool:
    """A tool the provider runs itself: its definition in the Responses tool shape (`spec`, what the caller gave),
    and where the request named it (`source`: `tools[2]`, or the plugin that added it), for the errors."""

    spec: dict[str, Any]
    source: str = "tools"


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    cache_control: dict[str, Any] | None = None  # a prompt-cache breakpoint after this tool (Anthropic's wire)


@dataclass(frozen=True)
class ReasoningConfig:
    effort: str | None = None  # max, xhigh, high, medium, low, minimal, none
    max_tokens: int | None = None
    summary: str | None = None  # auto, concise, detailed
    enabled: bool | None = None


@dataclass(frozen=True)
class CanonicalRequest:
    model: str  # the upstream model id of the endpoint being called
    input: tuple[Item, ...]
    instructions: str | None = None
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: str | dict[str, Any] | None = None  # "auto" | "none" | "required" | {"type": "function", "name": ...}
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    max_output_tokens: int | None = None
    stop: tuple[str, ...] = ()  # stop sequences: the answer ends before the first one generated
    seed: int | None = None
    logprobs: bool = False  # return each output token's log probability
    top_logprobs: int | None = None  # and this many most likely alternatives at each position (with logprobs)
    text_format: dict[str, Any] | None = (
        None  # {"type": "json_schema", "name", "schema", "strict"} | {"type": "json_object"}
    )
    verbosity: str | None = None
    reasoning: ReasoningConfig | None = None
    stream: bool = False
    safety_identifier: str | None = None  # already a keyed hash, never the caller's raw value
    prompt_cache_key: str | None = None
    cache_control: dict[str, Any] | None = None  # top-level {"type": "ephemeral", "ttl"?}
    service_tier: str | None = None
    # Tools the provider runs itself (web_search, code_interpreter, image_generation, mcp, ...): sent only to
    # endpoints whose catalog entry lists them (`hosted_tools`), each adapter in its format.
    hosted_tools: tuple["HostedTool", ...] = ()


# ---- response ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    web_search_requests: int = 0  # searches the provider ran itself (native web search), billed per search

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class TopLogprob:
    token: str
    logprob: float
    bytes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One output token's log probability, with the most likely alternatives when they were asked for."""

    token: str
    logprob: float
    bytes: tuple[int, ...] | None = None
    top_logprobs: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True)
class OutputMessage:
    text: str = ""
    refusal: str | None = None
    annotations: tuple[dict[str, Any], ...] = ()  # the first output_text part's (file-parser's file annotations)
    logprobs: tuple[TokenLogprob, ...] = ()  # the text's tokens, when the request asked and the upstream returned them
    stop_sequence: str | None = None  # the request's stop sequence that ended the text, when the upstream names it


@dataclass(frozen=True)
class OutputReasoning:
    summary: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    signature: str | None = None
    encrypted_content: str | None = None
    format: str = "unknown"


@dataclass(frozen=True)
class OutputFunctionCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class OutputHostedTool:
    """A tool call the provider ran itself (web_search_call, code_interpreter_call, image_generation_call, mcp_call,
    ...): the Responses output item as the caller sees it, and the stream events between its output_item.added and
    .done (a web search's in_progress, searching, completed)."""

    item: dict[str, Any]
    progress: tuple[str, ...] = ()


OutputItem = OutputMessage | OutputReasoning | OutputFunctionCall | OutputHostedTool


@dataclass(frozen=True)
class CanonicalResponse:
    output: tuple[OutputItem, ...]
    usage: Usage = field(default_factory=Usage)
    status: Literal["completed", "incomplete"] = "completed"
    incomplete_reason: str | None = None  # max_output_tokens | content_filter
    upstream_id: str | None = None
    model: str | None = None
    service_tier: str | None = None
    output_cut: bool = False  # the gateway cut it at the request's output bound (routing.output_bound)


# ---- stream events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseStarted:
    upstream_id: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()  # the delta's tokens, when asked for and returned


@dataclass(frozen=True)
class RefusalDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str
    kind: Literal["summary", "content"] = "content"


@dataclass(frozen=True)
class ReasoningSealed:
    """The end of a reasoning block with what a replay needs."""

    signature: str | None = None
    encrypted_content: str | None = None
    format: str = "unknown"


@dataclass(frozen=True)
class ToolCallStarted:
    index: int
    call_id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    index: int
    arguments: str


@dataclass(frozen=True)
class UsageReported:
    usage: Usage


@dataclass(frozen=True)
class Finished:
    status: Literal["completed", "incomplete"] = "completed"
    incomplete_reason: str | None = None
    service_tier: str | None = None
    stop_sequence: str | None = None  # the stop sequence that ended the answer, when the upstream names it


@dataclass(frozen=True)
class HostedToolCall:
    """A tool call the provider ran, complete (its item arrives whole: the provider ran it before answering)."""

    call: OutputHostedTool


@dataclass(frozen=True)
class TextAnnotated:
    """An annotation on the message being written (a provider's url_citation, in the flat Responses shape)."""

    annotation: dict[str, Any]


StreamEvent = (
    ResponseStarted
    | TextDelta
    | RefusalDelta
    | ReasoningDelta
    | ReasoningSealed
    | ToolCallStarted
    | ToolCallDelta
    | UsageReported
    | Finished
    | HostedToolCall
    | TextAnnotated
)
