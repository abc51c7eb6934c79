"""Serializers that document the Chat Completions answer in the OpenAPI schema."""

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from responses_api.chat.validation import UNSUPPORTED
from responses_api.schema import GatewayMetadataSerializer
from responses_api.validation.common import ClosedObjectSchema


class ChatToolCallFunctionSerializer(serializers.Serializer):
    name = serializers.CharField()
    arguments = serializers.CharField(help_text="JSON string")


class ChatToolCallSerializer(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.ChoiceField(choices=["function"])
    function = ChatToolCallFunctionSerializer()


class ChatMessageResultSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["assistant"])
    content = serializers.CharField(allow_null=True)
    refusal = serializers.CharField(allow_null=True)
    reasoning = serializers.CharField(allow_null=True)
    annotations = serializers.ListField(child=serializers.DictField())
    tool_calls = ChatToolCallSerializer(many=True, required=False)


class ChatTopLogprobSerializer(serializers.Serializer):
    token = serializers.CharField()
    logprob = serializers.FloatField()
    bytes = serializers.ListField(child=serializers.IntegerField(), allow_null=True, help_text="UTF-8 bytes")


class ChatTokenLogprobSerializer(ChatTopLogprobSerializer):
    top_logprobs = ChatTopLogprobSerializer(many=True, help_text="top_logprobs most likely alternatives")


class ChatLogprobsSerializer(serializers.Serializer):
    content = ChatTokenLogprobSerializer(many=True, allow_null=True)
    refusal = ChatTokenLogprobSerializer(many=True, allow_null=True)


class ChatChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = ChatMessageResultSerializer()
    finish_reason = serializers.ChoiceField(
        choices=["stop", "length", "tool_calls", "content_filter"],
        help_text='"stop" also when a stop sequence ended it',
    )
    logprobs = ChatLogprobsSerializer(allow_null=True, help_text="With logprobs: true; else null")


class ChatPromptDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()


class ChatCompletionDetailsSerializer(serializers.Serializer):
    reasoning_tokens = serializers.IntegerField()


class ChatUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    prompt_tokens_details = ChatPromptDetailsSerializer()
    completion_tokens_details = ChatCompletionDetailsSerializer()
    cost = serializers.FloatField(help_text="Charged to credits (USD)")
    is_byok = serializers.BooleanField()
    cost_details = serializers.DictField(allow_null=True)


class ChatCompletionResultSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The generation id (GET /generation?id=)")
    object = serializers.ChoiceField(choices=["chat.completion"])
    created = serializers.IntegerField()
    model = serializers.CharField()
    choices = ChatChoiceSerializer(many=True)
    service_tier = serializers.CharField(allow_null=True)
    system_fingerprint = serializers.CharField(allow_null=True)
    usage = ChatUsageSerializer()
    metadata = serializers.DictField(required=False, help_text="The request's metadata, echoed")
    gateway_metadata = GatewayMetadataSerializer(required=False)


class ChatCompletionChunkSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.ChoiceField(choices=["chat.completion.chunk"])
    created = serializers.IntegerField()
    model = serializers.CharField()
    choices = serializers.ListField(
        child=serializers.DictField(), help_text="[{index, delta, finish_reason, logprobs (with logprobs: true)}]"
    )
    usage = ChatUsageSerializer(required=False, help_text="Last chunk, with stream_options.include_usage")
    error = serializers.DictField(required=False, help_text="A mid-stream failure: {code, message, metadata}")


class ChatCompletionCreateRequestSchema(OpenApiSerializerExtension):
    """The serializer's cross-field rules in the schema: `model` or `models`; n is 1; store false; top_logprobs
    with logprobs; no field but those listed (the OpenAI fields the gateway refuses are listed as such)."""

    target_class = "responses_api.chat.validation.ChatCompletionCreateRequestSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        properties = schema["properties"]
        schema["anyOf"] = [{"required": ["model"]}, {"required": ["models"]}]
        properties["n"] = {"type": "integer", "nullable": True, "minimum": 1, "maximum": 1, "description": "Only 1"}
        only_false = {"not": {"type": "boolean", "enum": [True]}}
        properties["store"] = {"type": "boolean", "nullable": True, **only_false, "description": "Only false"}
        properties["logprobs"]["description"] = (
            "Return each output token's log probability in choices[].logprobs.content (routed only to endpoints "
            "that return logprobs)"
        )
        properties["top_logprobs"]["description"] = "0 to 20 most likely alternatives per token; needs logprobs: true"
        properties["seed"]["description"] = "Sampling seed (routed only to endpoints that honour a seed)"
        for name, why in UNSUPPORTED.items():
            properties[name] = {"description": f"Refused unless null or empty: {why}"}
        schema["additionalProperties"] = False
        return schema


# The door's own nested objects take their fields only (the door refuses any other, naming it).
class ChatStreamOptionsSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatStreamOptionsSerializer"


class ChatToolSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatToolSerializer"


class ChatFunctionSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatFunctionSerializer"


class ChatWebSearchOptionsSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatWebSearchOptionsSerializer"


class ChatUserLocationSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatUserLocationSerializer"


class ChatApproximateLocationSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatApproximateLocationSerializer"


class ChatResponseFormatSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatResponseFormatSerializer"


class ChatJsonSchemaSchema(ClosedObjectSchema):
    target_class = "responses_api.chat.validation.ChatJsonSchemaSerializer"
