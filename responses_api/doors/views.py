"""One view serving every front door: authenticate (the permission), parse, run, render (JSON or SSE)."""

from collections.abc import Iterator
from typing import ClassVar

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from responses_api import pipeline
from responses_api.doors.base import FrontDoor
from responses_api.metadata import view_error_metadata
from responses_api.streaming import framed

# The request headers the doors other than /responses document (its own wording is in responses_api/apis.py).
METADATA_HEADER = OpenApiParameter(
    "X-Gateway-Metadata",
    str,
    OpenApiParameter.HEADER,
    enum=["enabled", "disabled"],
    description="`enabled` adds gateway_metadata (aliases: X-OpenRouter-Metadata, as the openrouter SDK sends "
    "it, and the legacy X-Gateway-Experimental-Metadata; aliases sent with different values are a 400)",
)
SESSION_HEADER = OpenApiParameter(
    "x-session-id", str, OpenApiParameter.HEADER, description="Sticky routing key when the body has no session_id"
)


def streaming_response(body: Iterator[bytes], *, generation_id: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Generation-Id"] = generation_id
    return response


class DoorView(APIView):
    """A route's view names its door (and its OpenAPI operation); the life of the request is the same for all."""

    door: ClassVar[FrontDoor]
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc: Exception) -> Response:
        view_error_metadata(self.request, exc)  # gateway_metadata on every error after authentication
        return self.door.error(super().handle_exception(exc))

    def post(self, request: Request) -> Response | StreamingHttpResponse:
        door = self.door
        parsed = door.parse(request)
        run = door.prepare(pipeline.authenticate(request, parsed.data), parsed)
        if run.stream:
            body = framed(pipeline.respond_stream(run), door.render_events(run, parsed))
            return streaming_response(body, generation_id=run.generation_id)
        return Response(door.respond(run, parsed), headers={"X-Generation-Id": run.generation_id})
