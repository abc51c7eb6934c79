"""One view serving every front door: authenticate (the permission), parse, run, render (JSON or SSE)."""

from typing import ClassVar

from django.http import StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from responses_api import pipeline
from responses_api.doors.base import FrontDoor
from responses_api.metadata import view_error_metadata
from responses_api.streaming import framed


def streaming_response(body, *, generation_id: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Generation-Id"] = generation_id
    return response


class DoorView(APIView):
    """A route's view names its door (and its OpenAPI operation); the life of the request is the same for all."""

    door: ClassVar[FrontDoor]
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc):
        view_error_metadata(self.request, exc)  # gateway_metadata on every error after authentication
        return self.door.error(super().handle_exception(exc))

    def post(self, request: Request):
        door = self.door
        parsed = door.parse(request)
        run = door.prepare(pipeline.authenticate(request, parsed.data), parsed)
        if run.stream:
            body = framed(pipeline.respond_stream(run), door.render_events(run, parsed))
            return streaming_response(body, generation_id=run.generation_id)
        return Response(door.respond(run, parsed), headers={"X-Generation-Id": run.generation_id})
