from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers

from gateway.api import error_responses
from responses_api.doors.embeddings import EmbeddingsDoor
from responses_api.doors.views import METADATA_HEADER, SESSION_HEADER, DoorView
from responses_api.embeddings.validation import EmbeddingCreateRequestSerializer
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


@extend_schema_view(
    post=extend_schema(
        operation_id="createEmbeddings",
        description="Embeddings from the catalog's embedding models, routed with fallback, BYOK and credits like "
        "/responses\n(responses_api.embeddings.service), billed per input token.",
        tags=["Embeddings"],
        request=EmbeddingCreateRequestSerializer,
        parameters=[METADATA_HEADER, SESSION_HEADER],
        responses={
            200: EmbeddingListResultSerializer,
            **error_responses(400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 524, 529),
        },
    )
)
class EmbeddingCreateApi(DoorView):
    door = EmbeddingsDoor()
