from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from gateway.api import error_responses
from responses_api.metadata import view_error_metadata
from responses_api.schema import ResponseResultSerializer, ResponseStreamEventSerializer
from responses_api.service import RequestContext, response_create_json, response_prepare
from responses_api.streaming import response_open_stream
from responses_api.validation.request import ResponseCreateRequestSerializer

METADATA_HEADERS = ("HTTP_X_GATEWAY_METADATA", "HTTP_X_GATEWAY_EXPERIMENTAL_METADATA")


def request_context(request, data: dict) -> RequestContext:
    want_metadata = any(request.META.get(name, "").strip().lower() == "enabled" for name in METADATA_HEADERS)
    session_id = data.get("session_id") or request.META.get("HTTP_X_SESSION_ID", "")[:256]
    return RequestContext(caller=request.user, session_id=session_id, want_metadata=want_metadata)


class ResponseCreateApi(APIView):
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc):
        view_error_metadata(self.request, exc)  # gateway_metadata on every error after authentication
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="createResponses", tags=["Responses"], request=ResponseCreateRequestSerializer,
        parameters=[
            OpenApiParameter("X-Gateway-Metadata", str, OpenApiParameter.HEADER, enum=["enabled", "disabled"],
                             description="`enabled` adds gateway_metadata "
                                         "(legacy alias X-Gateway-Experimental-Metadata)"),
            OpenApiParameter("x-session-id", str, OpenApiParameter.HEADER,
                             description="Sticky routing key when the body has no session_id"),
        ],
        responses={
            (200, "application/json"): ResponseResultSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                ResponseStreamEventSerializer,
                description="With stream: true, server-sent events (`data: <event>`), ending with `data: [DONE]`."),
            **error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
    def post(self, request):
        serializer = ResponseCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run = response_prepare(ctx=request_context(request, data), data=data)
        headers = {"X-Generation-Id": run.generation_id}
        if run.stream:
            response = StreamingHttpResponse(response_open_stream(run=run), content_type="text/event-stream")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"
            response["X-Generation-Id"] = run.generation_id
            return response
        return Response(response_create_json(run=run), headers=headers)
