"""The Anthropic Messages door: the request as the Responses request it means, rendered as Anthropic Messages, every
error in Anthropic's shape (same statuses) so the Anthropic SDK raises its typed errors."""

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from responses_api import pipeline
from responses_api.doors.base import Parsed
from responses_api.doors.responses import PipelineDoor
from responses_api.messages.errors import anthropic_error
from responses_api.messages.render import PING, MessageEventTranslator, message
from responses_api.messages.translate import responses_data
from responses_api.messages.validation import MessageCreateRequestSerializer
from responses_api.run import ResponseRun
from responses_api.stream_render import Write
from responses_api.streaming import translated


def anthropic_shaped(response: Response) -> Response:
    anthropic = anthropic_error(response.data, response.status_code)
    if anthropic is not None:
        response.data = anthropic
    return response


class MessagesDoor(PipelineDoor):
    def parse(self, request: Request) -> Parsed:
        serializer = MessageCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = serializer.validated_data
        return Parsed(data=responses_data(body), body=body)

    def respond(self, run: ResponseRun, parsed: Parsed) -> dict[str, Any]:
        return message(pipeline.respond_json(run), generation_id=run.generation_id)

    def render_events(self, run: ResponseRun, parsed: Parsed) -> Callable[[Write], bytes]:
        return translated(MessageEventTranslator(generation_id=run.generation_id, model=run.plan.requested), PING)

    def error(self, response: Response) -> Response:
        return anthropic_shaped(response)
