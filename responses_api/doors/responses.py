"""The Responses door: the body is the pipeline's own request; the result and the events as they are."""

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from responses_api import pipeline
from responses_api.doors.base import Parsed
from responses_api.embeddings.service import refuse_embedding_models
from responses_api.run import ResponseRun
from responses_api.stream_render import Write
from responses_api.streaming import SSEFramer
from routing.stages import RequestContext


class PipelineDoor:
    """A door on responses_api.pipeline: an embedding model answers on /embeddings only."""

    def prepare(self, ctx: RequestContext, parsed: Parsed) -> ResponseRun:
        refuse_embedding_models(parsed.data)
        return pipeline.prepare_run(ctx=ctx, data=parsed.data)

    def error(self, response: Response) -> Response:
        return response


class ResponsesDoor(PipelineDoor):
    def parse(self, request: Request) -> Parsed:
        data = pipeline.validate(request)
        return Parsed(data=data, body=data)

    def respond(self, run: ResponseRun, parsed: Parsed) -> dict[str, Any]:
        return pipeline.respond_json(run)

    def render_events(self, run: ResponseRun, parsed: Parsed) -> Callable[[Write], bytes]:
        return SSEFramer().write
