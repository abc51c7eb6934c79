from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view

from gateway.api import error_responses
from responses_api.chat.schema import ChatCompletionChunkSerializer, ChatCompletionResultSerializer
from responses_api.chat.validation import ChatCompletionCreateRequestSerializer
from responses_api.doors.chat import ChatDoor
from responses_api.doors.views import METADATA_HEADER, SESSION_HEADER, DoorView


@extend_schema_view(
    post=extend_schema(
        operation_id="createChatCompletion",
        description="The Chat Completions request as the Responses request it means, on the same pipeline\n"
        "(responses_api.pipeline), rendered as Chat Completions.",
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
)
class ChatCompletionCreateApi(DoorView):
    door = ChatDoor()
