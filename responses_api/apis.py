from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from gateway.api import error_responses
from responses_api import pipeline
from responses_api.embeddings.service import refuse_embedding_models
from responses_api.metadata import view_error_metadata
from responses_api.schema import ResponseResultSerializer, ResponseStreamEventSerializer
from responses_api.validation.request import ResponseCreateRequestSerializer


class ResponseCreateApi(APIView):
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc):
        view_error_metadata(self.request, exc)  # gateway_metadata on every error after authentication
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="createResponses",
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
    def post(self, request):
        """The life of the request is responses_api.pipeline, top to bottom."""
        data = pipeline.validate(request)
        refuse_embedding_models(data)  # an embedding model answers on /embeddings only
        run = pipeline.prepare_run(ctx=pipeline.authenticate(request, data), data=data)
        if run.stream:
            response = StreamingHttpResponse(pipeline.respond_stream(run), content_type="text/event-stream")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"
            response["X-Generation-Id"] = run.generation_id
            return response
        return Response(pipeline.respond_json(run), headers={"X-Generation-Id": run.generation_id})
