from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from gateway.api import error_responses
from responses_api import pipeline
from responses_api.chat.events import relay
from responses_api.chat.render import ChunkTranslator, completion
from responses_api.chat.schema import ChatCompletionChunkSerializer, ChatCompletionResultSerializer
from responses_api.chat.translate import responses_data
from responses_api.chat.validation import ChatCompletionCreateRequestSerializer
from responses_api.embeddings.service import refuse_embedding_models
from responses_api.metadata import view_error_metadata

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


def streaming_response(body, *, generation_id: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Generation-Id"] = generation_id
    return response


class ChatCompletionCreateApi(APIView):
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc):
        view_error_metadata(self.request, exc)
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="createChatCompletion",
        tags=["Chat Completions"],
        request=ChatCompletionCreateRequestSerializer,
        parameters=[METADATA_HEADER, SESSION_HEADER],
        responses={
            (200, "application/json"): ChatCompletionResultSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                ChatCompletionChunkSerializer,
                description="With stream: true, `data: <chat.completion.chunk>` events ending with `data: [DONE]`; "
                "a failure after the first byte is a chunk with `error` and finish_reason `error`.",
            ),
            **error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
    def post(self, request: Request):
        """The Chat Completions request as the Responses request it means, on the same pipeline
        (responses_api.pipeline), rendered as Chat Completions."""
        serializer = ChatCompletionCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        chat = serializer.validated_data
        data = responses_data(chat)
        refuse_embedding_models(data)
        run = pipeline.prepare_run(ctx=pipeline.authenticate(request, data), data=data)
        if run.stream:
            translator = ChunkTranslator(
                generation_id=run.generation_id,
                model=run.plan.requested,
                include_usage=bool((chat.get("stream_options") or {}).get("include_usage")),
                with_logprobs=bool(chat.get("logprobs")),
            )
            return streaming_response(relay(pipeline.respond_stream(run), translator), generation_id=run.generation_id)
        result = pipeline.respond_json(run)
        return Response(
            completion(result, generation_id=run.generation_id, with_logprobs=bool(chat.get("logprobs"))),
            headers={"X-Generation-Id": run.generation_id},
        )
