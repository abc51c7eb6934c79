"""The Responses request body (spec "Response request")."""

from typing import Any

from rest_framework import serializers

from gateway import fields
from responses_api.validation.common import AnyField, LentFieldsSerializer, LongTextField, unknown_fields
from responses_api.validation.items import InputField
from responses_api.validation.objects import (
    CacheControlSerializer,
    DebugSerializer,
    ImageConfigField,
    MetadataField,
    PromptCacheOptionsSerializer,
    PromptSerializer,
    ProviderPreferencesSerializer,
    ReasoningSerializer,
    ResponseStreamOptionsSerializer,
    TextConfigSerializer,
    TraceSerializer,
)
from responses_api.validation.plugins import PluginsField
from responses_api.validation.stop_conditions import StopConditionsField
from responses_api.validation.tools import ToolChoiceField, ToolsField, tool_choice_problem

MODEL_ID_MAX = 256
MAX_TOOL_CALLS = 30
INCLUDES = (
    "file_search_call.results",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "reasoning.encrypted_content",
    "code_interpreter_call.outputs",
)
SERVICE_TIERS = ("auto", "default", "fast", "flex", "priority", "scale")
MSG_STATELESS = "is not supported: this endpoint is stateless; send the full conversation in input"
MSG_STREAM_OPTIONS = "stream_options is for streaming requests only (stream: true)"


class ResponseCreateRequestSerializer(LentFieldsSerializer):  # its field tree is lent, not rebuilt
    """A Responses API request: the input, the model (or `models` to fall back through), tools, plugins and
    options."""

    model = fields.CharField(required=False, max_length=MODEL_ID_MAX)
    models = fields.ListField(
        child=fields.CharField(max_length=MODEL_ID_MAX), required=False, min_length=1, max_length=16
    )
    input = InputField(required=False)
    instructions = LongTextField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    stream = fields.BooleanField(required=False, default=False)
    stream_options = ResponseStreamOptionsSerializer(required=False, allow_null=True)
    store = fields.BooleanField(required=False, default=False)
    background = fields.BooleanField(required=False, allow_null=True, default=None)
    previous_response_id = AnyField(required=False, allow_null=True)
    conversation = AnyField(required=False, allow_null=True)
    temperature = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    top_p = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    top_k = fields.IntegerField(required=False, min_value=0)
    top_logprobs = fields.IntegerField(required=False, allow_null=True, min_value=0, max_value=20)
    frequency_penalty = fields.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    presence_penalty = fields.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    max_output_tokens = fields.IntegerField(required=False, allow_null=True, min_value=1)
    max_tool_calls = fields.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_TOOL_CALLS, default=MAX_TOOL_CALLS
    )
    parallel_tool_calls = fields.BooleanField(required=False, allow_null=True, default=None)
    tools = ToolsField(required=False)
    tool_choice = ToolChoiceField(required=False)
    include = fields.ListField(
        child=fields.ChoiceField(choices=INCLUDES), required=False, allow_null=True, max_length=len(INCLUDES)
    )
    modalities = fields.ListField(child=fields.ChoiceField(choices=["text", "image"]), required=False, max_length=2)
    metadata = MetadataField(required=False, allow_null=True)
    service_tier = fields.ChoiceField(choices=SERVICE_TIERS, required=False, allow_null=True, default="auto")
    session_id = fields.CharField(required=False, max_length=256)
    user = fields.CharField(required=False, max_length=256)
    safety_identifier = fields.CharField(required=False, allow_null=True, max_length=1024)
    prompt_cache_key = fields.CharField(required=False, allow_null=True, max_length=1024)
    prompt_cache_options = PromptCacheOptionsSerializer(required=False)
    cache_control = CacheControlSerializer(required=False)
    debug = DebugSerializer(required=False)
    image_config = ImageConfigField(required=False)
    plugins = PluginsField(required=False)
    route = fields.ChoiceField(choices=["fallback", "sort"], required=False, allow_null=True)
    prompt = PromptSerializer(required=False, allow_null=True)
    provider = ProviderPreferencesSerializer(required=False, allow_null=True)
    reasoning = ReasoningSerializer(required=False, allow_null=True)
    stop_server_tools_when = StopConditionsField(required=False)
    text = TextConfigSerializer(required=False)
    trace = TraceSerializer(required=False)
    truncation = fields.ChoiceField(choices=["auto", "disabled"], required=False, allow_null=True)

    def validate_store(self, value: bool) -> bool:
        if value:
            raise serializers.ValidationError("only false is supported: this endpoint stores nothing")
        return value

    def validate_previous_response_id(self, value: Any) -> Any:
        if value is not None:
            raise serializers.ValidationError(MSG_STATELESS)
        return value

    def validate_conversation(self, value: Any) -> Any:
        if value is not None:
            raise serializers.ValidationError(MSG_STATELESS)
        return value

    def validate_background(self, value: bool | None) -> bool | None:
        if value:
            raise serializers.ValidationError("background mode is not supported: this endpoint is stateless")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # A field no serializer declares, at the top or in a nested object, would be dropped: refused, naming its
        # path, as the other doors and the official API do (input items and plugins check their own keys).
        if unknown := unknown_fields(self, self.initial_data):
            raise serializers.ValidationError(unknown)
        if not attrs.get("model") and not attrs.get("models"):
            raise serializers.ValidationError({"model": "model (or models) is required"})
        if not attrs.get("input"):
            raise serializers.ValidationError({"input": "input is required and must not be empty"})
        if attrs.get("stream_options") is not None and not attrs.get("stream"):
            raise serializers.ValidationError({"stream_options": MSG_STREAM_OPTIONS})
        if problem := tool_choice_problem(attrs.get("tool_choice"), attrs.get("tools") or []):
            raise serializers.ValidationError({"tool_choice": problem})
        if attrs.get("service_tier") == "fast":
            attrs["service_tier"] = "priority"
        return attrs
