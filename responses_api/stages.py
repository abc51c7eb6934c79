"""The stage interface of the request pipeline (responses_api.pipeline). A stage is a named callable: a
pre-stage gets the canonical request before routing and returns it (changed or not) or a Block; a post-stage
gets the canonical response before settlement and returns it or a Block. Each stage that runs adds one
`StageEntry` to `gateway_metadata.pipeline` (the spec's entry: `type`, `name`, `summary`, and `data`)."""

from dataclasses import dataclass
from typing import Literal, Protocol

from gateway.errors import GatewayError
from responses_api.service import RequestContext
from routing.canonical import CanonicalRequest, CanonicalResponse


@dataclass(frozen=True, slots=True)
class Block:
    """A stage refuses the request (or the response): answered as the spec's error body with this status."""

    message: str
    status: int = 400
    metadata: dict | None = None  # the error's `metadata` (a guardrail: its `patterns`)

    def error(self) -> GatewayError:
        return GatewayError(self.message, status=self.status, metadata=self.metadata)


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
