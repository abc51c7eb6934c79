"""The Chat Completions request body (https://platform.openai.com/docs/api-reference/chat/create) plus this
gateway's fields, validated as strictly as POST /responses (JSON types as sent, 400 naming the field). What no
route can honour is refused with the reason, never dropped."""

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gateway import fields
from responses_api.chat.messages import MessagesField
from responses_api.validation.common import LentFieldsSerializer, unknown_fields
from responses_api.validation.limits import MAX_TOOLS
from responses_api.validation.objects import (
    CacheControlSerializer,
    DebugSerializer,
    MetadataField,
    ProviderPreferencesSerializer,
    ReasoningSerializer,
)
from responses_api.validation.plugins import PluginsField
from responses_api.validation.request import MODEL_ID_MAX, SERVICE_TIERS
from responses_api.validation.tools import FUNCTION_NAME, TOOL_CHOICE_MODES, tool_choice_problem

# Fields of the Chat Completions API that the canonical request cannot carry to every route: refused, with why.
UNSUPPORTED = {
    "logit_bias": "logit_bias is not supported: most providers this gateway routes to ignore it",
    "audio": "audio output is not supported by any provider this gateway serves",
    "prediction": "predicted outputs are not supported by this gateway",
    "functions": 'the deprecated "functions" field is not supported: use tools',
    "function_call": 'the deprecated "function_call" field is not supported: use tool_choice',
}
MSG_N = "only n=1 is supported: this gateway returns one choice per request"
MSG_TOP_LOGPROBS = "top_logprobs needs logprobs: true"
MAX_STOP = 4  # OpenAI's limit on stop sequences
SEED_RANGE = (-(2**63), 2**63 - 1)
MSG_FUNCTION_NAME = "may only contain letters, digits, _ . : - (at most 128)"
MSG_DEBUG_STREAM = "streaming only: the upstream body is the stream's first chunk"
MSG_STREAM_OPTIONS = "stream_options is only allowed with stream: true"
EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")


class InlineChoiceField(fields.ChoiceField):
    """A choice documented in place, not as a shared enum component: drf-spectacular names those by field name,
    and `type` is another choice set on every object (a collision only its settings could resolve)."""


class InlineChoiceFieldSchema(OpenApiSerializerFieldExtension):
    target_class = InlineChoiceField

    def map_serializer_field(self, auto_schema, direction):
        schema: dict = {"oneOf": [{"type": "string", "enum": list(self.target.choices)}]}
        if self.target.allow_null:
            schema["nullable"] = True
        return schema


class ChatFunctionSerializer(serializers.Serializer):
    name = fields.CharField(max_length=128, validators=[RegexValidator(FUNCTION_NAME, MSG_FUNCTION_NAME)])
    description = fields.CharField(required=False, allow_null=True, allow_blank=True)
    parameters = fields.DictField(required=False, allow_null=True)
    strict = fields.BooleanField(required=False, allow_null=True, default=None)

    def validate_parameters(self, value):
        if value is not None and value.get("type", "object") != "object":
            raise serializers.ValidationError('needs "type": "object" (a JSON Schema of the arguments)')
        return value


class ChatToolSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["function"])
    function = ChatFunctionSerializer()


class ChatToolChoiceFunctionSerializer(serializers.Serializer):
    name = fields.CharField(max_length=128)


class ChatToolChoiceSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["function"])
    function = ChatToolChoiceFunctionSerializer()


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": list(TOOL_CHOICE_MODES)},
            {
                "type": "object",
                "required": ["type", "function"],
                "properties": {
                    "type": {"type": "string", "enum": ["function"]},
                    "function": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 128}},
                    },
                },
            },
            {
                "type": "object",
                "required": ["type", "allowed_tools"],
                "description": "Only these function tools may be called (auto: may; required: one must be)",
                "properties": {
                    "type": {"type": "string", "enum": ["allowed_tools"]},
                    "allowed_tools": {
                        "type": "object",
                        "required": ["mode", "tools"],
                        "properties": {
                            "mode": {"type": "string", "enum": ["auto", "required"]},
                            "tools": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": MAX_TOOLS,
                                "items": {
                                    "type": "object",
                                    "required": ["type", "function"],
                                    "properties": {
                                        "type": {"type": "string", "enum": ["function"]},
                                        "function": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {"name": {"type": "string", "minLength": 1}},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        ],
        "nullable": True,
    }
)
class ChatToolChoiceField(serializers.Field):
    """ "none" | "auto" | "required" | {"type": "function", "function": {"name"}} | {"type": "allowed_tools",
    "allowed_tools": {"mode", "tools"}} -> the Responses form."""

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, str):
            if data not in TOOL_CHOICE_MODES:
                raise serializers.ValidationError(f'"{data}" is not valid; expected one of {list(TOOL_CHOICE_MODES)}')
            return data
        if isinstance(data, dict) and data.get("type") == "allowed_tools":
            return chat_allowed_tools(data)
        serializer = ChatToolChoiceSerializer(data=data)
        if not isinstance(data, dict) or not serializer.is_valid():
            raise serializers.ValidationError(
                serializer.errors if isinstance(data, dict) else "must be auto, none, required or a function choice"
            )
        return {"type": "function", "name": serializer.validated_data["function"]["name"]}


def chat_allowed_tools(data: dict) -> dict:
    """{type: allowed_tools, allowed_tools: {mode: auto|required, tools: [{type: function, function: {name}}]}}
    (https://platform.openai.com/docs/api-reference/chat/create) -> the Responses form, {type, mode, tools}."""
    allowed = data.get("allowed_tools")
    if set(data) != {"type", "allowed_tools"} or not isinstance(allowed, dict) or set(allowed) - {"mode", "tools"}:
        raise serializers.ValidationError("allowed_tools takes type and allowed_tools: {mode, tools} only")
    tools = allowed.get("tools")
    if (
        allowed.get("mode") not in ("auto", "required")
        or not isinstance(tools, list)
        or not 0 < len(tools) <= MAX_TOOLS
    ):
        raise serializers.ValidationError({"allowed_tools": f"needs mode auto|required and 1 to {MAX_TOOLS} tools"})
    names = []
    for index, tool in enumerate(tools):
        serializer = ChatToolChoiceSerializer(data=tool)
        if not isinstance(tool, dict) or set(tool) - {"type", "function"} or not serializer.is_valid():
            raise serializers.ValidationError(
                {"allowed_tools": {"tools": {str(index): "must be {type: function, function: {name}}"}}}
            )
        names.append(serializer.validated_data["function"]["name"])
    return {"type": "allowed_tools", "mode": allowed["mode"], "tools": [{"type": "function", "name": n} for n in names]}


class ChatJsonSchemaSerializer(serializers.Serializer):
    name = fields.CharField(max_length=64)
    schema = fields.DictField(required=False)
    strict = fields.BooleanField(required=False, allow_null=True)
    description = fields.CharField(required=False, allow_null=True)


class ChatResponseFormatSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["text", "json_object", "json_schema"])
    json_schema = ChatJsonSchemaSerializer(required=False)

    def validate(self, attrs):
        if attrs["type"] == "json_schema" and "json_schema" not in attrs:
            raise serializers.ValidationError({"json_schema": "is required for type json_schema"})
        return attrs


class ChatApproximateLocationSerializer(serializers.Serializer):
    city = fields.CharField(required=False, max_length=200)
    region = fields.CharField(required=False, max_length=200)
    country = fields.CharField(required=False, min_length=2, max_length=2, help_text="ISO 3166-1 alpha-2")
    timezone = fields.CharField(required=False, max_length=64, help_text="IANA timezone")


class ChatUserLocationSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["approximate"])
    approximate = ChatApproximateLocationSerializer(required=False)


class ChatWebSearchOptionsSerializer(serializers.Serializer):
    """`web_search_options`: the provider's own web search (OpenAI's search models, or any endpoint that runs web
    search: routed only to those, as the Responses `web_search` tool)."""

    search_context_size = fields.ChoiceField(choices=["low", "medium", "high"], required=False)
    user_location = ChatUserLocationSerializer(required=False, allow_null=True)


class ChatStreamOptionsSerializer(serializers.Serializer):
    include_usage = fields.BooleanField(required=False, default=False)
    include_obfuscation = fields.BooleanField(
        required=False, allow_null=True, help_text="Only false: the gateway adds no obfuscation padding to chunks"
    )

    def validate_include_obfuscation(self, value):
        if value:
            raise serializers.ValidationError("only false is supported: the gateway adds no obfuscation to chunks")
        return value


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": MAX_STOP},
        ],
        "nullable": True,
        "description": f"Up to {MAX_STOP} sequences: the answer ends before the first one generated (finish_reason "
        '"stop"). Routed only to endpoints that honour stop sequences.',
    }
)
class StopField(serializers.Field):
    """`stop`: a string or up to 4 strings -> a list of stop sequences."""

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        sequences = [data] if isinstance(data, str) else data
        if not isinstance(sequences, list) or not all(isinstance(item, str) for item in sequences):
            raise serializers.ValidationError("must be a string or an array of strings")
        if not sequences or len(sequences) > MAX_STOP:
            raise serializers.ValidationError(f"must hold 1 to {MAX_STOP} stop sequences")
        if not all(sequences):
            raise serializers.ValidationError("a stop sequence must not be empty")
        for sequence in sequences:
            fields.check_text(sequence)
        return sequences


class ChatCompletionCreateRequestSerializer(LentFieldsSerializer):
    """A Chat Completions request: the messages, the model (or `models` to fall back through) and its options."""

    model = fields.CharField(required=False, max_length=MODEL_ID_MAX)
    models = fields.ListField(
        child=fields.CharField(max_length=MODEL_ID_MAX), required=False, min_length=1, max_length=16
    )
    messages = MessagesField()
    stream = fields.BooleanField(required=False, default=False)
    stream_options = ChatStreamOptionsSerializer(required=False, allow_null=True)
    n = fields.IntegerField(required=False, allow_null=True, min_value=1)
    logprobs = fields.BooleanField(required=False, allow_null=True)
    top_logprobs = fields.IntegerField(required=False, allow_null=True, min_value=0, max_value=20)
    stop = StopField(required=False, allow_null=True)
    seed = fields.IntegerField(required=False, allow_null=True, min_value=SEED_RANGE[0], max_value=SEED_RANGE[1])
    temperature = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    top_p = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    top_k = fields.IntegerField(required=False, allow_null=True, min_value=0)
    frequency_penalty = fields.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    presence_penalty = fields.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    max_tokens = fields.IntegerField(required=False, allow_null=True, min_value=1)
    max_completion_tokens = fields.IntegerField(required=False, allow_null=True, min_value=1)
    tools = serializers.ListField(child=ChatToolSerializer(), required=False, allow_null=True, max_length=512)
    tool_choice = ChatToolChoiceField(required=False, allow_null=True)
    parallel_tool_calls = fields.BooleanField(required=False, allow_null=True, default=None)
    web_search_options = ChatWebSearchOptionsSerializer(required=False, allow_null=True)
    response_format = ChatResponseFormatSerializer(required=False, allow_null=True)
    reasoning = ReasoningSerializer(required=False, allow_null=True)
    reasoning_effort = InlineChoiceField(choices=EFFORTS, required=False, allow_null=True)
    verbosity = fields.ChoiceField(choices=["low", "medium", "high", "xhigh", "max"], required=False, allow_null=True)
    modalities = fields.ListField(child=fields.ChoiceField(choices=["text"]), required=False, max_length=1)
    store = fields.BooleanField(required=False, allow_null=True)
    metadata = MetadataField(required=False, allow_null=True)
    service_tier = fields.ChoiceField(choices=SERVICE_TIERS, required=False, allow_null=True, default="auto")
    user = fields.CharField(required=False, max_length=256)
    safety_identifier = fields.CharField(required=False, allow_null=True, max_length=1024)
    prompt_cache_key = fields.CharField(required=False, allow_null=True, max_length=1024)
    cache_control = CacheControlSerializer(required=False)
    session_id = fields.CharField(required=False, max_length=256)
    provider = ProviderPreferencesSerializer(required=False, allow_null=True)
    plugins = PluginsField(required=False)
    route = fields.ChoiceField(choices=["fallback", "sort"], required=False, allow_null=True)
    debug = DebugSerializer(required=False)

    def validate_n(self, value):
        if value not in (None, 1):
            raise serializers.ValidationError(MSG_N)
        return value

    def validate_store(self, value):
        if value:
            raise serializers.ValidationError("only false is supported: this endpoint stores nothing")
        return value

    def validate(self, attrs):
        raw = self.initial_data if isinstance(self.initial_data, dict) else {}
        refused = {name: why for name, why in UNSUPPORTED.items() if raw.get(name) not in (None, [], {}, "")}
        if refused:
            raise serializers.ValidationError(refused)
        if unknown := unknown_fields(self, raw, known=frozenset(UNSUPPORTED)):
            raise serializers.ValidationError(unknown)
        if not attrs.get("model") and not attrs.get("models"):
            raise serializers.ValidationError({"model": "model (or models) is required"})
        if attrs.get("top_logprobs") is not None and not attrs.get("logprobs"):
            raise serializers.ValidationError({"top_logprobs": MSG_TOP_LOGPROBS})
        if (attrs.get("debug") or {}).get("echo_upstream_body") and not attrs.get("stream"):
            raise serializers.ValidationError({"debug": {"echo_upstream_body": MSG_DEBUG_STREAM}})
        if attrs.get("stream_options") is not None and not attrs.get("stream"):
            raise serializers.ValidationError({"stream_options": MSG_STREAM_OPTIONS})
        limits = {attrs.get("max_tokens"), attrs.get("max_completion_tokens")} - {None}
        if len(limits) > 1:
            raise serializers.ValidationError(
                {"max_completion_tokens": "differs from max_tokens: send one (max_tokens is its deprecated name)"}
            )
        effort, reasoning = attrs.get("reasoning_effort"), attrs.get("reasoning") or {}
        if effort and reasoning.get("effort") not in (None, effort):
            raise serializers.ValidationError({"reasoning_effort": "differs from reasoning.effort: send one"})
        names = [tool["function"]["name"] for tool in attrs.get("tools") or []]
        if len(names) != len(set(names)):
            raise serializers.ValidationError({"tools": "function tool names must be unique"})
        choice = attrs.get("tool_choice")
        if choice == "required" and not names and attrs.get("web_search_options") is None:
            raise serializers.ValidationError({"tool_choice": "required needs tools (or web_search_options) to call"})
        if problem := tool_choice_problem(choice, [{"type": "function", "name": name} for name in names]):
            raise serializers.ValidationError({"tool_choice": problem})
        if attrs.get("service_tier") == "fast":
            attrs["service_tier"] = "priority"
        return attrs
