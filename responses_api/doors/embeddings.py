"""The embeddings door: embeddings from the catalog's embedding models, routed with fallback, BYOK and credits like
/responses (responses_api.embeddings.service), billed per input token. Never streamed."""

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from gateway.errors import GatewayError
from responses_api.doors.base import Parsed
from responses_api.embeddings.service import embeddings_call, embeddings_prepare_run, embeddings_result
from responses_api.embeddings.validation import EmbeddingCreateRequestSerializer
from responses_api.run import ResponseRun, response_abandon
from responses_api.stream_render import Write
from routing.stages import RequestContext


class EmbeddingsDoor:
    def parse(self, request: Request) -> Parsed:
        serializer = EmbeddingCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return Parsed(data=data, body=data)

    def prepare(self, ctx: RequestContext, parsed: Parsed) -> ResponseRun:
        run, parsed.inputs = embeddings_prepare_run(ctx=ctx, data=parsed.data)
        return run

    def respond(self, run: ResponseRun, parsed: Parsed) -> dict[str, Any]:
        try:
            served, response, usage = embeddings_call(run, parsed.inputs)
        except GatewayError:
            raise
        except Exception:
            response_abandon(run)
            raise
        return embeddings_result(run, served, response, usage)

    def render_events(self, run: ResponseRun, parsed: Parsed) -> Callable[[Write], bytes]:
        raise AssertionError("an embeddings run is never a stream")

    def error(self, response: Response) -> Response:
        return response
