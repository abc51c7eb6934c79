"""The Anthropic Messages request body (https://docs.anthropic.com/en/api/messages) plus this gateway's fields,
validated as strictly as POST /responses; what no route can honour is refused with the reason."""

from django.core.validators import RegexValidator
from rest_framework import serializers

from gateway import fields
from responses_api.chat.validation import MSG_FUNCTION_NAME, InlineChoiceField
from responses_api.messages.blocks import SystemField, TurnsField
from responses_api.validation.common import LentFieldsSerializer, unknown_fields
from responses_api.validation.objects import CacheControlSerializer, DebugSerializer, ProviderPreferencesSerializer
from responses_api.validation.plugins import PluginsField
from responses_api.validation.request import MODEL_ID_MAX
from responses_api.validation.tools import FUNCTION_NAME

UNSUPPORTED = {
    "container": "containers are not available on this gateway",
    "mcp_servers": "MCP servers are not available on this gateway",
    "context_management": "context management is not available on this gateway",
}
MIN_THINKING_BUDGET = 1024
MSG_DEBUG = "not available on /messages: Anthropic's event stream has no event for it (use /chat/completions)"
MIN_TOP_P_THINKING = 0.95
MAX_STOP_SEQUENCES = 256


class AnthropicToolSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["custom"], required=False)
    name = fields.CharField(max_length=128, validators=[RegexValidator(FUNCTION_NAME, MSG_FUNCTION_NAME)])
    description = fields.CharField(required=False, allow_blank=True)
    input_schema = fields.DictField()
    strict = fields.BooleanField(required=False, allow_null=True, help_text="The call's input follows input_schema")
    cache_control = CacheControlSerializer(required=False, allow_null=True, help_text="A breakpoint after this tool")

    def validate_input_schema(self, value):
        if value.get("type", "object") != "object":
            raise serializers.ValidationError('needs "type": "object" (a JSON Schema of the arguments)')
        return value

    def to_internal_value(self, data):
        if isinstance(data, dict) and data.get("type") not in (None, "custom"):
            raise serializers.ValidationError(
                {"type": f'"{data["type"]}" server tools are not available on this gateway; only custom tools'}
            )
        return super().to_internal_value(data)


class AnthropicToolChoiceSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["auto", "any", "tool", "none"])
    name = fields.CharField(required=False, max_length=128)
    disable_parallel_tool_use = fields.BooleanField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        if attrs["type"] == "tool" and not attrs.get("name"):
            raise serializers.ValidationError({"name": "is required for a tool choice of type tool"})
        return attrs


class AnthropicThinkingSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["enabled", "disabled", "adaptive"])
    budget_tokens = fields.IntegerField(required=False, min_value=MIN_THINKING_BUDGET)

    def validate(self, attrs):
        if attrs["type"] == "enabled" and "budget_tokens" not in attrs:
            raise serializers.ValidationError({"budget_tokens": "is required when thinking is enabled"})
        return attrs


class AnthropicOutputFormatSerializer(serializers.Serializer):
    type = InlineChoiceField(choices=["json_schema"])
    schema = fields.DictField()


class AnthropicOutputConfigSerializer(serializers.Serializer):
    format = AnthropicOutputFormatSerializer(
        required=False, allow_null=True, help_text="Structured output: the answer is JSON following the schema"
    )


class AnthropicMetadataSerializer(serializers.Serializer):
    user_id = fields.CharField(required=False, allow_null=True, max_length=256)


class MessageCreateRequestSerializer(LentFieldsSerializer):
    """An Anthropic Messages request: the messages, the model and its options."""

    model = fields.CharField(max_length=MODEL_ID_MAX)
    models = fields.ListField(
        child=fields.CharField(max_length=MODEL_ID_MAX), required=False, min_length=1, max_length=16
    )
    max_tokens = fields.IntegerField(min_value=1)
    messages = TurnsField()
    system = SystemField(required=False)
    stream = fields.BooleanField(required=False, default=False)
    temperature = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    top_p = fields.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    top_k = fields.IntegerField(required=False, allow_null=True, min_value=0)
    tools = serializers.ListField(child=AnthropicToolSerializer(), required=False, max_length=512)
    tool_choice = AnthropicToolChoiceSerializer(required=False)
    thinking = AnthropicThinkingSerializer(required=False)
    stop_sequences = fields.ListField(
        child=fields.CharField(),
        required=False,
        max_length=MAX_STOP_SEQUENCES,
        help_text='The answer ends before the first one generated: stop_reason "stop_sequence" with stop_sequence set '
        "(routed only to endpoints that honour stop sequences)",
    )
    output_config = AnthropicOutputConfigSerializer(required=False)
    cache_control = CacheControlSerializer(
        required=False, allow_null=True, help_text="Automatic caching: a breakpoint on the prompt's last block"
    )
    metadata = AnthropicMetadataSerializer(required=False)
    service_tier = InlineChoiceField(choices=["auto", "standard_only"], required=False)
    session_id = fields.CharField(required=False, max_length=256)
    provider = ProviderPreferencesSerializer(required=False, allow_null=True)
    plugins = PluginsField(required=False)
    route = fields.ChoiceField(choices=["fallback", "sort"], required=False, allow_null=True)
    debug = DebugSerializer(required=False)

    def validate(self, attrs):
        raw = self.initial_data if isinstance(self.initial_data, dict) else {}
        refused = {name: why for name, why in UNSUPPORTED.items() if raw.get(name) not in (None, [], {}, "")}
        if refused:
            raise serializers.ValidationError(refused)
        if unknown := unknown_fields(self, raw, known=frozenset(UNSUPPORTED)):
            raise serializers.ValidationError(unknown)
        choice = attrs.get("tool_choice") or {}
        names = [tool["name"] for tool in attrs.get("tools") or []]
        if choice.get("type") == "any" and not names:
            raise serializers.ValidationError({"tool_choice": "any needs tools to call"})
        if choice.get("type") == "tool" and choice["name"] not in names:
            raise serializers.ValidationError({"tool_choice": f'no tool named "{choice["name"]}"'})
        if len(names) != len(set(names)):
            raise serializers.ValidationError({"tools": "tool names must be unique"})
        thinking = attrs.get("thinking") or {}
        if thinking.get("budget_tokens") and "max_tokens" in attrs and thinking["budget_tokens"] >= attrs["max_tokens"]:
            raise serializers.ValidationError({"thinking": {"budget_tokens": "must be less than max_tokens"}})
        if thinking.get("type") in ("enabled", "adaptive"):
            check_beside_thinking(attrs)
        if (attrs.get("debug") or {}).get("echo_upstream_body"):
            raise serializers.ValidationError({"debug": {"echo_upstream_body": MSG_DEBUG}})
        return attrs


def check_beside_thinking(attrs: dict) -> None:
    """What Anthropic's API refuses with thinking on (and its adapter would drop): a forced tool choice,
    temperature other than 1, top_k, top_p under 0.95."""
    if (attrs.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise serializers.ValidationError({"thinking": "cannot be on when tool_choice forces a tool (any, tool)"})
    if attrs.get("temperature") not in (None, 1):
        raise serializers.ValidationError({"temperature": "may only be 1 (or unset) when thinking is on"})
    if attrs.get("top_k") is not None:
        raise serializers.ValidationError({"top_k": "must be unset when thinking is on"})
    if attrs.get("top_p") is not None and attrs["top_p"] < MIN_TOP_P_THINKING:
        raise serializers.ValidationError({"top_p": f"must be {MIN_TOP_P_THINKING} to 1 when thinking is on"})
