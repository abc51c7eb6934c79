"""The stage interface of the request pipeline (responses_api.pipeline). A stage is a named callable: a
pre-stage gets the canonical request before routing and returns it (changed or not) or a Block; a post-stage
gets the canonical response before settlement and returns it or a Block. Each stage that runs adds one
`StageEntry` to `gateway_metadata.pipeline` (the spec's entry: `type`, `name`, `summary`, and `data`)."""

from dataclasses import dataclass
from typing import Literal, Protocol

from gateway.errors import GatewayError
from responses_api.service import RequestContext
from routing.canonical import CanonicalRequest, CanonicalResponse
from routing.errors import ErrorType


@dataclass(frozen=True, slots=True)
class Block:
    """A stage refuses the request (or the response): answered as the spec's error body with this status."""

    message: str
    status: int = 400
    metadata: dict | None = None  # the error's `metadata` (a guardrail: its `patterns`)
    error_type: ErrorType = ErrorType.INVALID_REQUEST  # a stream refused after its 200: the failed event's

    def error(self) -> "StageBlocked":
        return StageBlocked(self.message, status=self.status, metadata=self.metadata, error_type=self.error_type)


class StageBlocked(GatewayError):
    """A stage's Block as an error: an HTTP error before a stream's 200, a failed event after it."""

    def __init__(self, message: str, *, status: int, metadata: dict | None, error_type: ErrorType):
        super().__init__(message, status=status, metadata=metadata)
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class StageEntry:
    """One line of `gateway_metadata.pipeline`."""

    type: str  # the stage's kind: guardrail, request_plugin, response_plugin, server_tools
    name: str
    outcome: Literal["passed", "changed", "blocked"]

    def as_dict(self) -> dict:
        return {"type": self.type, "name": self.name, "summary": self.outcome, "data": {}}


class PreStage(Protocol):
    """Guardrails, request plugins: before routing, so a changed request is what gets planned and held."""

    type: str
    name: str

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> CanonicalRequest | Block: ...


class PostStage(Protocol):
    """Response plugins, the server-tool loop: after the attempts, before settlement and rendering."""

    type: str
    name: str

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Block: ...


# The configured stages, in order (empty today: guardrails, plugins and server tools will register here).
PRE_STAGES: list[PreStage] = []
POST_STAGES: list[PostStage] = []


def post_stages(response: CanonicalResponse, ctx: RequestContext, ran: list[StageEntry]) -> CanonicalResponse:
    """The post-stages in order, each listed in `ran`; raises StageBlocked when one refuses the response."""
    for stage in POST_STAGES:
        result = stage(response, ctx)
        if isinstance(result, Block):
            ran.append(StageEntry(type=stage.type, name=stage.name, outcome="blocked"))
            raise result.error()
        ran.append(StageEntry(type=stage.type, name=stage.name, outcome="passed" if result is response else "changed"))
        response = result
    return response
