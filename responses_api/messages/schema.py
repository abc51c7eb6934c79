"""Serializers that document the Anthropic Messages answer and errors in the OpenAPI schema."""

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from responses_api.messages.validation import UNSUPPORTED
from responses_api.schema import GatewayMetadataSerializer
from responses_api.validation.common import ClosedObjectSchema


class AnthropicUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(help_text="Not read from or written to the cache")
    output_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cost = serializers.FloatField(help_text="Charged to credits (USD)")
    is_byok = serializers.BooleanField()


class AnthropicContentBlockSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["text", "thinking", "redacted_thinking", "tool_use"])
    text = serializers.CharField(required=False)
    thinking = serializers.CharField(required=False)
    signature = serializers.CharField(required=False, allow_blank=True)
    data = serializers.CharField(required=False)  # type: ignore[assignment]  # redacted_thinking's field
    id = serializers.CharField(required=False)
    name = serializers.CharField(required=False)
    input = serializers.DictField(required=False)


class MessageResultSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The generation id (GET /generation?id=)")
    type = serializers.ChoiceField(choices=["message"])
    role = serializers.ChoiceField(choices=["assistant"])
    model = serializers.CharField()
    content = AnthropicContentBlockSerializer(many=True)
    stop_reason = serializers.ChoiceField(choices=["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"])
    stop_sequence = serializers.CharField(
        allow_null=True, help_text='The request\'s stop sequence that ended the answer (stop_reason "stop_sequence")'
    )
    usage = AnthropicUsageSerializer()
    gateway_metadata = GatewayMetadataSerializer(required=False)


class MessageStreamEventSerializer(serializers.Serializer):
    type = serializers.CharField(
        help_text="message_start, ping, content_block_start, content_block_delta, content_block_stop, "
        "message_delta, message_stop; error on a failure after the first byte"
    )


class AnthropicErrorDetailSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="invalid_request_error, authentication_error, ..., overloaded_error")
    message = serializers.CharField()


class AnthropicErrorBodySerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["error"])
    error = AnthropicErrorDetailSerializer()
    gateway_metadata = serializers.DictField(required=False)


class MessageTokensCountSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(
        help_text="The gateway's estimate (4 characters a token, 1,000 an image): what its credit hold counts"
    )


def anthropic_error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: OpenApiResponse(AnthropicErrorBodySerializer, description=f"HTTP {code}") for code in codes}


class MessageCreateRequestSchema(OpenApiSerializerExtension):
    """No field but those listed: one the request does not take is refused, never dropped."""

    target_class = "responses_api.messages.validation.MessageCreateRequestSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        for name, why in UNSUPPORTED.items():
            schema["properties"][name] = {"description": f"Refused unless null or empty: {why}"}
        schema["additionalProperties"] = False
        return schema


class AnthropicThinkingSchema(OpenApiSerializerExtension):
    """`budget_tokens` is required when `type` is enabled (the serializer's cross-field rule, in the schema)."""

    target_class = "responses_api.messages.validation.AnthropicThinkingSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        schema["anyOf"] = [
            {"properties": {"type": {"enum": ["disabled", "adaptive"]}}},
            {"required": ["budget_tokens"]},
        ]
        schema["additionalProperties"] = False
        return schema


# The door's own nested objects take their fields only (the door refuses any other, naming it).
class AnthropicToolSchema(ClosedObjectSchema):
    target_class = "responses_api.messages.validation.AnthropicToolSerializer"


class AnthropicToolChoiceSchema(ClosedObjectSchema):
    target_class = "responses_api.messages.validation.AnthropicToolChoiceSerializer"


class AnthropicOutputConfigSchema(ClosedObjectSchema):
    target_class = "responses_api.messages.validation.AnthropicOutputConfigSerializer"


class AnthropicOutputFormatSchema(ClosedObjectSchema):
    target_class = "responses_api.messages.validation.AnthropicOutputFormatSerializer"


class AnthropicMetadataSchema(ClosedObjectSchema):
    target_class = "responses_api.messages.validation.AnthropicMetadataSerializer"
