"""The stage interface of the request pipeline (responses_api.pipeline runs the stages; the configured ones
are listed by settings.PIPELINE_PRE_STAGES / PIPELINE_POST_STAGES). It lives here, below responses_api,
guardrails and plugins, so that each of them can write a stage without importing another. A stage is a named callable: a
pre-stage gets the canonical request before routing and returns it (changed or not) or a Block; a post-stage
gets the canonical response before settlement and returns it or a Block. Each stage that runs adds one
`StageEntry` to `gateway_metadata.pipeline` (the spec's entry: `type`, `name`, `summary`, and `data`); a
pre-stage with more to say returns `Staged`: its own entries, and limits on where the request may route."""

from dataclasses import dataclass, field
from typing import Protocol

from gateway.accounts.authentication import Caller
from gateway.billing.services import SpendCap
from gateway.errors import GatewayError
from routing.canonical import CanonicalRequest, CanonicalResponse
from routing.errors import ErrorType
from routing.limits import RoutingLimit


@dataclass(frozen=True)
class RequestContext:
    caller: Caller
    session_id: str = ""
    want_metadata: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    """A stage refuses the request (or the response): answered as the spec's error body with this status."""

    message: str
    status: int = 400
    metadata: dict | None = None  # the error's `metadata` (a guardrail: its `patterns`)
    error_type: ErrorType = ErrorType.INVALID_REQUEST  # a stream refused after its 200: the failed event's
    entries: tuple["StageEntry", ...] = ()  # the stage's own pipeline entries (else one "blocked" entry)

    def error(self) -> "StageBlocked":
        return StageBlocked(self.message, status=self.status, metadata=self.metadata, error_type=self.error_type)


class StageBlocked(GatewayError):
    """A stage's Block as an error: an HTTP error before a stream's 200, a failed event after it. `pipeline`:
    the entries of the stages that ran, for the error's gateway_metadata."""

    def __init__(self, message: str, *, status: int, metadata: dict | None, error_type: ErrorType):
        super().__init__(message, status=status, metadata=metadata)
        self.error_type = error_type
        self.pipeline: list[dict] = []


@dataclass(frozen=True, slots=True)
class StageEntry:
    """One line of `gateway_metadata.pipeline`: `summary` says what the stage did (passed, changed, blocked,
    or its own words); `data` and `extra` (a guardrail's `guardrail_id`, `guardrail_scope`) as the spec has."""

    type: str  # the stage's kind: guardrail, request_plugin, response_plugin, server_tools
    name: str
    outcome: str
    data: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"type": self.type, "name": self.name, "summary": self.outcome, **self.extra, "data": self.data}


@dataclass(frozen=True, slots=True)
class Staged:
    """A pre-stage's result with more than the request: its own pipeline entries (instead of the default
    passed/changed one), limits the plan must honour (a guardrail's models, providers, data policy) and budgets
    the credit hold must fit in."""

    request: CanonicalRequest
    entries: tuple[StageEntry, ...] = ()
    limits: tuple[RoutingLimit, ...] = ()
    caps: tuple[SpendCap, ...] = ()  # budgets the credit hold must fit in


class PreStage(Protocol):
    """Guardrails, request plugins: before routing, so a changed request is what gets planned and held."""

    type: str
    name: str

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> CanonicalRequest | Staged | Block: ...


class PostStage(Protocol):
    """Response plugins, the server-tool loop: after the attempts, before settlement and rendering."""

    type: str
    name: str

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Block: ...
