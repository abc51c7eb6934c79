"""The stage interface of the request pipeline (responses_api.pipeline runs the stages; the configured ones
are listed by settings.PIPELINE_PRE_STAGES / PIPELINE_POST_STAGES). It lives here, below responses_api,
guardrails and plugins, so that each of them can write a stage without importing another. A stage is a named callable: a
pre-stage gets the canonical request before routing and returns it (changed or not) or a Block; a post-stage
gets the canonical response before settlement and returns it or a Block. Each stage that runs adds one
`StageEntry` to `gateway_metadata.pipeline` (the spec's entry: `type`, `name`, `summary`, and `data`); a
pre-stage with more to say returns `Staged`: its own entries, and limits on where the request may route."""

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from gateway.accounts.authentication import Caller
from gateway.billing.services import ReservationHandle, SpendCap
from gateway.errors import GatewayError
from routing.accumulate import FoldStep
from routing.canonical import CanonicalRequest, CanonicalResponse, FunctionTool, Usage
from routing.errors import ErrorType
from routing.limits import RoutingLimit

if TYPE_CHECKING:
    from routing.attempts import AttemptStream, Served, _Waiting
    from routing.selection import Candidate

# The most one server-tool result adds to the next round's input (plugins.server_tools cuts results to it; the
# credit hold of a request with server tools counts it per round).
SERVER_TOOL_RESULT_TOKENS = 8192

QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
# The functions the server tools the gateway runs are declared to the model as (plugins.server_tools runs them;
# responses_api.normalize declares a request's, a fusion panel its members').
SERVER_FUNCTIONS = {
    "gateway:datetime": (
        "The current date and time. Pass an IANA timezone (e.g. Europe/Paris) for local time; UTC by default.",
        {"type": "object", "properties": {"timezone": {"type": "string"}}},
    ),
    "gateway:search_models": ("Search the AI models this gateway serves by name, provider or capability.", QUERY),
    "gateway:tool_search": (
        "Search for more tools by name or description; the tools found can be called in the next turn.",
        QUERY,
    ),
    "gateway:web_search": ("Search the web; returns result titles, URLs and snippets.", QUERY),
    "gateway:web_fetch": (
        "Fetch a web page or PDF by URL and return its text.",
        {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    ),
    "gateway:fusion": (
        "Ask a panel of AI models the same question in parallel; an analyst compares their answers. Returns the "
        "analysis (consensus, contradictions, partial coverage, unique insights, blind spots) and each answer. "
        "Use it for hard or contested questions; write your answer from it.",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The question, complete and self-contained"}},
            "required": ["prompt"],
        },
    ),
}


def server_function(kind: str) -> FunctionTool:
    """The function a server tool the gateway runs is declared as: gateway:web_search -> gateway_web_search."""
    description, parameters = SERVER_FUNCTIONS[kind]
    return FunctionTool(name=kind.replace(":", "_", 1), description=description, parameters=parameters)


@dataclass(frozen=True)
class ToolLoop:
    """What the server-tool loop (a post-stage) needs from the run: the validated request body (`data`: its tools
    with their parameters, deferred function tools, max_tool_calls, stop_server_tools_when), `call`: one more round
    through the attempt engine with this canonical request (the model filled in per candidate; the round's usage is
    billed with the request; raises UpstreamError when no candidate answers), `first`: the endpoint that served the
    first round, `charge`: a tool's own cost and the tokens of its own model calls (a web search, a fusion panel),
    charged with the request and added to its usage, and on a stream `stream`: a round as `call` does it, streamed
    (its fold steps as they arrive, WAITING while the first content is awaited; returns the round served)."""

    data: dict[str, Any]
    call: "Callable[[CanonicalRequest], Served]"
    first: "Callable[[], Candidate | None]"
    charge: Callable[[Decimal, Usage], None]
    stream: "Callable[[CanonicalRequest], Generator[list[FoldStep] | _Waiting, None, Served]] | None" = None
    # A hold a tool took for its own model calls (a gateway:fusion panel's): given back by the request's settlement,
    # in the same transaction that charges what they cost.
    keep: Callable[[ReservationHandle], None] | None = None
    # What the loop hands the model in a later round, scanned by the caller's guardrails first (ToolResultScan).
    scan: "ToolResultScan | None" = None


@dataclass(frozen=True, slots=True)
class ServerToolItem:
    """A server tool call the gateway ran, as the output item the caller sees (`item`: its type, id, status and
    results), in the response's output after the items of the round that called it. `progress`: the stream events
    between its output_item.added and .done (each its `type` and fields: a web search's in_progress, searching,
    completed; a fusion call's panel and analysis events)."""

    item: dict[str, Any]
    progress: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A server tool call streamed as it runs (the live loop): `added` (the item in progress), `progress` (one of
    its events: `event` is its type and fields) or `done` (the finished item), at output index `index`."""

    phase: Literal["added", "progress", "done"]
    index: int
    item: dict[str, Any]
    event: dict[str, Any] | None = None


# What the live server-tool loop yields to the stream: a round's fold steps (output indices over the whole
# answer), a server tool call's events, or WAITING (time for a keep-alive).
LoopEvent: TypeAlias = "list[FoldStep] | ToolEvent | _Waiting"


@dataclass(frozen=True)
class RequestContext:
    """Who asks and how; set once the request is validated. `plugins`: the request's validated `plugins` entries
    as given (a plugin package applies the account's defaults to them: plugins.common.config). `models`: the requested
    models without routing suffixes. `request`: the canonical request as the pre-stages left it (None before),
    which the post-stages see (a response plugin needs the request's `text.format`)."""

    caller: Caller
    session_id: str = ""
    want_metadata: bool = False
    plugins: tuple[dict[str, Any], ...] = ()
    models: tuple[str, ...] = ()
    stream: bool = False
    request: CanonicalRequest | None = None
    tool_loop: ToolLoop | None = None  # the server-tool loop's access to the run (post-stages only)
    suffix: str | None = None  # the first requested model's routing suffix (":nitro" -> "nitro"; a router sees it)
    provider: dict[str, Any] | None = (
        None  # the request's provider preferences: a plugin's own model calls honour them too
    )
    # The budgets (guardrails) the request's holds must fit in, once the guardrail stage set them: every hold of a
    # model call made for the request (a fusion panel's) checks them, with the credits, before the call.
    caps: tuple[SpendCap, ...] = ()
    # What the request's own hold will need were it this request routed to these models, its input estimated this
    # many tokens more (the pipeline's responses_api.own_hold; None outside it): a stage whose paid calls run before
    # that hold (a fusion panel) holds it up front too, so that hold is never refused after they ran.
    own_hold: Callable[[CanonicalRequest, tuple[str, ...], int], Decimal] | None = None
    # The caller's guardrails' scan of what a server-tool loop hands a model in a later round, for a context (its
    # budgets hold an entity model's call): set by responses_api (plugins do not import guardrails), so that a fusion
    # panel member's own loop is scanned as the request's is. None, or returning None: nothing to scan.
    result_scan: "Callable[[RequestContext], ToolResultScan | None] | None" = None


@dataclass(frozen=True, slots=True)
class Block:
    """A stage refuses the request (or the response): answered as the spec's error body with this status."""

    message: str
    status: int = 400
    metadata: dict[str, Any] | None = None  # the error's `metadata` (a guardrail: its `patterns`)
    error_type: ErrorType = ErrorType.INVALID_REQUEST  # a stream refused after its 200: the failed event's
    entries: tuple["StageEntry", ...] = ()  # the stage's own pipeline entries (else one "blocked" entry)
    cost_usd: Decimal = Decimal(0)  # what the stage's own checks cost before it refused (charged: they ran)
    holds: tuple[ReservationHandle, ...] = ()  # the holds it took for them: the refusal's charge takes them over

    def error(self) -> "StageBlocked":
        return StageBlocked(self.message, status=self.status, metadata=self.metadata, error_type=self.error_type)


class StageBlocked(GatewayError):
    """A stage's Block as an error: an HTTP error before a stream's 200, a failed event after it. `pipeline`:
    the entries of the stages that ran, for the error's gateway_metadata."""

    def __init__(self, message: str, *, status: int, metadata: dict[str, Any] | None, error_type: ErrorType):
        super().__init__(message, status=status, metadata=metadata)
        self.error_type = error_type
        self.pipeline: list[dict[str, Any]] = []


@dataclass(frozen=True, slots=True)
class StageEntry:
    """One line of `gateway_metadata.pipeline`: `summary` says what the stage did (passed, changed, blocked,
    or its own words); `data` and `extra` (a guardrail's `guardrail_id`, `guardrail_scope`) as the spec has."""

    type: str  # the stage's kind: guardrail, request_plugin, response_plugin, server_tools
    name: str
    outcome: str
    data: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    cost_usd: Decimal | None = None  # what the stage's own model calls cost (charged with the request)

    def as_dict(self) -> dict[str, Any]:
        entry = {"type": self.type, "name": self.name, "summary": self.outcome, **self.extra, "data": self.data}
        if self.cost_usd is not None:
            entry["cost_usd"] = float(self.cost_usd)
        return entry


NO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class Staged:
    """A pre-stage's result with more than the request: its own pipeline entries (instead of the default
    passed/changed one), limits the plan must honour (a guardrail's models, providers, data policy) and budgets
    the credit hold must fit in."""

    request: CanonicalRequest
    entries: tuple[StageEntry, ...] = ()
    limits: tuple[RoutingLimit, ...] = ()
    caps: tuple[SpendCap, ...] = ()  # budgets the credit hold must fit in
    cost_usd: Decimal = Decimal(0)  # the stage's own model calls (moderation, OCR): added to the hold and charge
    record: dict[str, Any] = field(default_factory=dict)  # figures for the generation record (GenerationRecord fields)
    models: tuple[str, ...] = ()  # a router's choice: the models to plan instead of the requested ones, in order
    strategy: str = ""  # how they were chosen (gateway_metadata.strategy: auto, pareto, fusion), with `models`
    usage: Usage = field(default_factory=Usage)  # the tokens of the stage's own model calls (added to the usage)
    # Holds the stage took to cover `cost_usd` before it was spent (a fusion panel's): the request's own hold takes
    # them over (billing's credits_reserve `replacing`); a refused request is charged `cost_usd` out of them.
    holds: tuple[ReservationHandle, ...] = ()

    def adds_nothing(self) -> bool:
        """Nothing besides the request (a stage with nothing to do for it, as most are for most requests)."""
        return not (
            self.entries
            or self.limits
            or self.caps
            or self.cost_usd
            or self.record
            or self.models
            or self.strategy
            or self.holds
            or self.usage != NO_USAGE
        )


# The guardrails' scan of what the server-tool loop adds to a later round (the tools' results as function_call_output
# items in `input`, the tools tool_search found in `tools`): a Staged (the request with its redactions, what the
# scan's checks cost and their holds) or a Block. The guardrails build it; responses_api hands it to the loop.
ToolResultScan: TypeAlias = Callable[[CanonicalRequest], Staged | Block]


@dataclass(frozen=True, slots=True)
class Restaged:
    """A post-stage's result with more than the response: its own pipeline entries (what it fixed)."""

    response: CanonicalResponse
    entries: tuple[StageEntry, ...] = ()
    record: dict[str, Any] = field(default_factory=dict)  # figures for the generation record


class PreStage(Protocol):
    """Guardrails, request plugins: before routing, so a changed request is what gets planned and held.
    `plugin_ids`: the `plugins` ids the stage honours (a request naming a plugin no configured stage honours is
    refused with 400, never accepted and ignored)."""

    type: str
    name: str
    plugin_ids: tuple[str, ...]

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> CanonicalRequest | Staged | Block: ...


class PostStage(Protocol):
    """Response plugins, the server-tool loop: after the attempts, before settlement and rendering. `wants`: does
    it run on this request (a stream is buffered for its post-stages only when one wants it)."""

    type: str
    name: str
    plugin_ids: tuple[str, ...]

    def wants(self, ctx: RequestContext) -> bool: ...

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Restaged | Block: ...


class LiveStage(Protocol):
    """A post-stage that can run while its stream is relayed (the server-tool loop): `live` takes the first round's
    open stream and yields what the client is sent as it happens (LoopEvent), returning the response as `__call__`
    would; raises UpstreamError when a later round fails."""

    def live(self, first: "AttemptStream", ctx: RequestContext) -> "Generator[LoopEvent, None, Restaged]": ...
