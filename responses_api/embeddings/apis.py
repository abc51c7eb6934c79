from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.permissions import IsInferenceKey
from gateway.api import error_responses
from gateway.errors import GatewayError
from responses_api import pipeline
from responses_api.chat.apis import METADATA_HEADER, SESSION_HEADER
from responses_api.embeddings.service import embeddings_call, embeddings_prepare_run, embeddings_result
from responses_api.embeddings.validation import EmbeddingCreateRequestSerializer
from responses_api.metadata import view_error_metadata
from responses_api.run import response_abandon
from responses_api.schema import GatewayMetadataSerializer


class EmbeddingDataSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["embedding"])
    index = serializers.IntegerField()
    embedding = serializers.JSONField(
        help_text="Numbers, or base64 of little-endian float32 with encoding_format base64"
    )


class EmbeddingUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.FloatField(help_text="Charged to credits (USD)")
    is_byok = serializers.BooleanField()


class EmbeddingListResultSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    id = serializers.CharField(help_text="The generation id (GET /generation?id=)")
    model = serializers.CharField()
    data = EmbeddingDataSerializer(many=True)  # type: ignore[assignment]  # the API's field
    usage = EmbeddingUsageSerializer()
    gateway_metadata = GatewayMetadataSerializer(required=False)


class EmbeddingCreateApi(APIView):
    permission_classes = [IsInferenceKey]

    def handle_exception(self, exc):
        view_error_metadata(self.request, exc)
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="createEmbeddings",
        tags=["Embeddings"],
        request=EmbeddingCreateRequestSerializer,
        parameters=[METADATA_HEADER, SESSION_HEADER],
        responses={
            200: EmbeddingListResultSerializer,
            **error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
    def post(self, request: Request):
        """Embeddings from the catalog's embedding models, routed with fallback, BYOK and credits like /responses
        (responses_api.embeddings.service), billed per input token."""
        serializer = EmbeddingCreateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run, inputs = embeddings_prepare_run(ctx=pipeline.authenticate(request, data), data=data)
        try:
            served, response, usage = embeddings_call(run, inputs)
        except GatewayError:
            raise
        except Exception:
            response_abandon(run)
            raise
        return Response(embeddings_result(run, served, response, usage), headers={"X-Generation-Id": run.generation_id})
