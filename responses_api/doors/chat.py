"""The Chat Completions door: the request as the Responses request it means, rendered as Chat Completions."""

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request

from responses_api import pipeline
from responses_api.chat.render import ChunkTranslator, completion
from responses_api.chat.translate import responses_data
from responses_api.chat.validation import ChatCompletionCreateRequestSerializer
from responses_api.doors.base import Parsed
from responses_api.doors.responses import PipelineDoor
from responses_api.run import ResponseRun
from responses_api.stream_render import Write
from responses_api.streaming import translated


class ChatDoor(PipelineDoor):
    def parse(self, request: Request) -> Parsed:
        serializer = ChatCompletionCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        chat = serializer.validated_data
        return Parsed(data=responses_data(chat), body=chat)

    def respond(self, run: ResponseRun, parsed: Parsed) -> dict[str, Any]:
        result = pipeline.respond_json(run)
        return completion(result, generation_id=run.generation_id, with_logprobs=bool(parsed.body.get("logprobs")))

    def render_events(self, run: ResponseRun, parsed: Parsed) -> Callable[[Write], bytes]:
        translator = ChunkTranslator(
            generation_id=run.generation_id,
            model=run.plan.requested,
            include_usage=bool((parsed.body.get("stream_options") or {}).get("include_usage")),
            with_logprobs=bool(parsed.body.get("logprobs")),
        )
        return translated(translator)
