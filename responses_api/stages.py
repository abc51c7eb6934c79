"""The stage interface of the request pipeline (responses_api.pipeline). A stage is a named callable: a
pre-stage gets the canonical request before routing and returns it (changed or not) or a Block; a post-stage
gets the canonical response before settlement and returns it or a Block. Each stage that runs adds one
`StageEntry` to `gateway_metadata.pipeline`."""

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

    def error(self, stage: str) -> GatewayError:
        return GatewayError(self.message, status=self.status, metadata={"pipeline": {"stage": stage,
                                                                                     "blocked": True}})


@dataclass(frozen=True, slots=True)
class StageEntry:
    """One line of `gateway_metadata.pipeline`."""

    stage: str
    outcome: Literal["passed", "changed", "blocked"]

    def as_dict(self) -> dict:
        return {"stage": self.stage, "outcome": self.outcome}


class PreStage(Protocol):
    """Guardrails, request plugins: before routing, so a changed request is what gets planned and held."""

    name: str

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> CanonicalRequest | Block: ...


class PostStage(Protocol):
    """Response plugins, the server-tool loop: after the attempts, before settlement and rendering."""

    name: str

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Block: ...


# The configured stages, in order (empty today: guardrails, plugins and server tools will register here).
PRE_STAGES: list[PreStage] = []
POST_STAGES: list[PostStage] = []
