"""Serializers that document the Responses result and stream in the OpenAPI schema."""

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from responses_api.validation.common import ClosedObjectSchema


class UsageInputDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField(required=False)


class UsageOutputDetailsSerializer(serializers.Serializer):
    reasoning_tokens = serializers.IntegerField()


class ResponseUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    input_tokens_details = UsageInputDetailsSerializer()
    output_tokens = serializers.IntegerField()
    output_tokens_details = UsageOutputDetailsSerializer()
    total_tokens = serializers.IntegerField()
    cost = serializers.FloatField(help_text="Charged to credits (USD)")
    is_byok = serializers.BooleanField()


class OutputItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["message", "reasoning", "function_call"])
    id = serializers.CharField()
    status = serializers.CharField()
    role = serializers.CharField(required=False, help_text="message: assistant")
    content = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="message: output_text/refusal parts; reasoning: reasoning_text parts",
    )
    summary = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="reasoning: summary_text parts"
    )
    format = serializers.CharField(required=False, help_text="reasoning: e.g. anthropic-claude-v1")
    signature = serializers.CharField(required=False)
    encrypted_content = serializers.CharField(required=False)
    call_id = serializers.CharField(required=False, help_text="function_call")
    name = serializers.CharField(required=False, help_text="function_call")
    arguments = serializers.CharField(required=False, help_text="function_call: JSON string")


class ResponseErrorFieldSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class EndpointChoiceSerializer(serializers.Serializer):
    model = serializers.CharField()
    provider = serializers.CharField()
    selected = serializers.BooleanField()


class EndpointsMetadataSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    available = EndpointChoiceSerializer(many=True)


class GatewayMetadataSerializer(serializers.Serializer):
    requested = serializers.CharField()
    strategy = serializers.CharField()
    region = serializers.CharField()
    summary = serializers.CharField()
    attempt = serializers.IntegerField()
    is_byok = serializers.BooleanField()
    endpoints = EndpointsMetadataSerializer()
    pipeline = serializers.ListField(child=serializers.DictField())


class ResponseResultSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.ChoiceField(choices=["response"])
    status = serializers.ChoiceField(choices=["completed", "incomplete", "in_progress", "failed"])
    created_at = serializers.IntegerField()
    completed_at = serializers.IntegerField(allow_null=True)
    model = serializers.CharField()
    output = OutputItemSerializer(many=True)
    usage = ResponseUsageSerializer(required=False)
    error = ResponseErrorFieldSerializer(allow_null=True)
    error_type = serializers.CharField(required=False)
    incomplete_details = serializers.DictField(allow_null=True)
    instructions = serializers.CharField(allow_null=True)
    metadata = serializers.DictField(allow_null=True)
    tools = serializers.ListField(child=serializers.DictField())
    tool_choice = serializers.JSONField()
    parallel_tool_calls = serializers.BooleanField()
    temperature = serializers.FloatField(allow_null=True)
    top_p = serializers.FloatField(allow_null=True)
    presence_penalty = serializers.FloatField(allow_null=True)
    frequency_penalty = serializers.FloatField(allow_null=True)
    max_output_tokens = serializers.IntegerField(allow_null=True)
    service_tier = serializers.CharField(allow_null=True)
    text = serializers.DictField()
    gateway_metadata = GatewayMetadataSerializer(required=False)


class ResponseStreamEventSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="response.created, response.output_text.delta, ..., response.completed")
    sequence_number = serializers.IntegerField()


class ResponseCreateRequestSchema(OpenApiSerializerExtension):
    """What the request serializer's cross-field rules mean for the schema, so schema and validation agree:
    `model` or `models` is required, `input` is required and not empty, this endpoint is stateless."""

    target_class = "responses_api.validation.request.ResponseCreateRequestSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        properties = schema["properties"]
        schema["required"] = sorted({*schema.get("required", []), "input"})
        schema["anyOf"] = [{"required": ["model"]}, {"required": ["models"]}]
        only_false = {"not": {"type": "boolean", "enum": [True]}}  # (enum under `not`: no enum component)
        properties["store"] = {
            "type": "boolean",
            "default": False,
            **only_false,
            "description": "Only false: this endpoint stores nothing",
        }
        properties["background"] = {
            "type": "boolean",
            "nullable": True,
            **only_false,
            "description": "Only false or null: background mode needs stored responses",
        }
        only_null = {"type": "string", "nullable": True, "not": {"type": "string"}}
        properties["previous_response_id"] = {
            **only_null,
            "description": "Only null: send the full conversation in input",
        }
        properties["conversation"] = {
            **only_null,
            "description": "Only null: this endpoint keeps no conversations; send the full conversation in input",
        }
        properties["stream_options"]["description"] = "Streaming requests only (stream: true)"
        schema["additionalProperties"] = False  # the serializer refuses any other field, naming it
        return schema


class TextFormatSchema(OpenApiSerializerExtension):
    target_class = "responses_api.validation.objects.TextFormatSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        # (enums under `not`: drf-spectacular turns a bare `enum` into the component of the whole choice set)
        schema["additionalProperties"] = False
        schema["anyOf"] = [
            {"properties": {"type": {"not": {"enum": ["json_schema"]}}}},
            {"required": ["name", "schema"]},
        ]
        return schema


class ResponseStreamOptionsSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.ResponseStreamOptionsSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = super().map_serializer(auto_schema, direction)
        schema["properties"]["include_obfuscation"] |= {"not": {"type": "boolean", "enum": [True]}}
        return schema


# The request's nested objects take their fields only (every door using them refuses any other, naming its path).
class ProviderPreferencesSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.ProviderPreferencesSerializer"


class MaxPriceSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.MaxPriceSerializer"


class ReasoningSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.ReasoningSerializer"


class TextConfigSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.TextConfigSerializer"


class CacheControlSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.CacheControlSerializer"


class PromptCacheOptionsSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.PromptCacheOptionsSerializer"


class DebugSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.DebugSerializer"


class PromptSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.PromptSerializer"


class TraceSchema(ClosedObjectSchema):
    target_class = "responses_api.validation.objects.TraceSerializer"
