"""The canonical request, response and stream events that every provider adapter translates.

They follow the Responses API's vocabulary (our public API), so the Responses layer maps onto them
directly and each adapter only knows its own wire format.
"""

from dataclasses import dataclass, field
from typing import Literal

# ---- request -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextPart:
    text: str
    cache_control: dict | None = None
    # An assistant's output_text sent back: its annotations; a file the file-parser turned into this text: the
    # file's annotation (what the answer carries so the caller can skip parsing it again). Adapters send text only.
    annotations: tuple[dict, ...] = ()


@dataclass(frozen=True)
class ImagePart:
    url: str  # https URL or data: URL
    detail: str = "auto"


@dataclass(frozen=True)
class FilePart:
    filename: str | None = None
    file_data: str | None = None  # data: URL or base64
    file_url: str | None = None
    file_id: str | None = None


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


@dataclass(frozen=True)
class FunctionCallOutput:
    call_id: str
    output: str


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
class FunctionTool:
    name: str
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None


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
    tool_choice: str | dict | None = None  # "auto" | "none" | "required" | {"type": "function", "name": ...}
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    max_output_tokens: int | None = None
    top_logprobs: int | None = None
    text_format: dict | None = None  # {"type": "json_schema", "name", "schema", "strict"} | {"type": "json_object"}
    verbosity: str | None = None
    reasoning: ReasoningConfig | None = None
    stream: bool = False
    safety_identifier: str | None = None  # already a keyed hash, never the caller's raw value
    prompt_cache_key: str | None = None
    cache_control: dict | None = None  # top-level {"type": "ephemeral", "ttl"?}
    service_tier: str | None = None


# ---- response ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class OutputMessage:
    text: str = ""
    refusal: str | None = None
    annotations: tuple[dict, ...] = ()  # the first output_text part's (file-parser's file annotations)


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


OutputItem = OutputMessage | OutputReasoning | OutputFunctionCall


@dataclass(frozen=True)
class CanonicalResponse:
    output: tuple[OutputItem, ...]
    usage: Usage = field(default_factory=Usage)
    status: Literal["completed", "incomplete"] = "completed"
    incomplete_reason: str | None = None  # max_output_tokens | content_filter
    upstream_id: str | None = None
    model: str | None = None
    service_tier: str | None = None


# ---- stream events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseStarted:
    upstream_id: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str


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
)
