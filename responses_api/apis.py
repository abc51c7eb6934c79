from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view

from gateway.api import error_responses
from responses_api.doors.responses import ResponsesDoor
from responses_api.doors.views import DoorView
from responses_api.schema import ResponseResultSerializer, ResponseStreamEventSerializer
from responses_api.validation.request import ResponseCreateRequestSerializer


@extend_schema_view(
    post=extend_schema(
        operation_id="createResponses",
        description="The life of the request is responses_api.pipeline, top to bottom.",
        tags=["Responses"],
        request=ResponseCreateRequestSerializer,
        parameters=[
            OpenApiParameter(
                "X-Gateway-Metadata",
                str,
                OpenApiParameter.HEADER,
                enum=["enabled", "disabled"],
                description="`enabled` adds gateway_metadata (aliases: X-OpenRouter-Metadata, as the openrouter SDK "
                "sends it, and the legacy X-Gateway-Experimental-Metadata; aliases with different values are a 400)",
            ),
            OpenApiParameter(
                "x-session-id",
                str,
                OpenApiParameter.HEADER,
                description="Sticky routing key when the body has no session_id",
            ),
        ],
        responses={
            (200, "application/json"): ResponseResultSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                ResponseStreamEventSerializer,
                description="With stream: true, server-sent events (`data: <event>`), ending with `data: [DONE]`.",
            ),
            **error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
)
class ResponseCreateApi(DoorView):
    door = ResponsesDoor()
