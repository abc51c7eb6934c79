"""The contract every front door keeps (served by responses_api.doors.views.DoorView): its body parsed into the request
the corridor takes, the corridor's result rendered in its API's shape, the stream's events rendered as its API's
SSE, and its errors in its API's shape."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rest_framework.request import Request
from rest_framework.response import Response

from responses_api.run import ResponseRun
from responses_api.stream_render import Write
from routing.stages import RequestContext


@dataclass(slots=True)
class Parsed:
    """A door's request: `data` the Responses request the pipeline takes, `body` the door's own validated body
    (what its rendering needs of it), `inputs` what a door's run kept from its preparation (the embeddings' inputs)."""

    data: dict[str, Any]
    body: dict[str, Any]
    inputs: tuple[Any, ...] = field(default=())


class FrontDoor(Protocol):
    def parse(self, request: Request) -> Parsed:
        """The body validated (a 400 that names the field otherwise), as the request the corridor takes."""

    def prepare(self, ctx: RequestContext, parsed: Parsed) -> ResponseRun:
        """The run (normalized, pre-staged, planned, held); errors here are HTTP errors."""

    def respond(self, run: ResponseRun, parsed: Parsed) -> dict[str, Any]:
        """The run to its end as a JSON answer: its result rendered in this API's shape."""

    def render_events(self, run: ResponseRun, parsed: Parsed) -> Callable[[Write], bytes]:
        """A write of the stream's events as this API's SSE bytes."""

    def error(self, response: Response) -> Response:
        """An error response in this API's shape."""
