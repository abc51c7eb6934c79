"""`plugins`: discriminated by `id`, with every field limit of the spec."""

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.utils import Direction, PolymorphicProxySerializer
from rest_framework import serializers

from gateway import fields
from responses_api.validation.checks import check_count
from responses_api.validation.common import LendingSerializer, PlannedSerializer
from responses_api.validation.limits import MAX_PLUGINS
from responses_api.validation.tools import panel_tools_error

if TYPE_CHECKING:  # drf_spectacular.openapi imports DRF's views, which import the API settings' modules
    from drf_spectacular.openapi import AutoSchema

MAX_PATTERNS, MAX_PATTERN_CHARS, MAX_PATTERNS_TOTAL = 1024, 1024, 65536
COST_TIERS = ("low", "medium", "high", "xhigh", "max")


def _patterns(value: list[str]) -> None:
    if len(value) > MAX_PATTERNS:
        raise serializers.ValidationError(f"at most {MAX_PATTERNS} items")
    if any(len(item) > MAX_PATTERN_CHARS for item in value):
        raise serializers.ValidationError(f"each item at most {MAX_PATTERN_CHARS} characters")
    if sum(len(item) for item in value) > MAX_PATTERNS_TOTAL:
        raise serializers.ValidationError(f"at most {MAX_PATTERNS_TOTAL} characters in total")


class PluginBase(LendingSerializer):
    id: serializers.Field[Any, Any, Any, Any] = fields.CharField()  # each plugin narrows it to its own id
    enabled = fields.BooleanField(required=False, default=True)


class AutoBetaRouterPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["auto-beta-router"])
    allowed_models = fields.ListField(
        child=fields.CharField(), required=False, max_length=MAX_PATTERNS, validators=[_patterns]
    )
    excluded_models = fields.ListField(
        child=fields.CharField(), required=False, max_length=MAX_PATTERNS, validators=[_patterns]
    )
    cost_tier = fields.ChoiceField(choices=COST_TIERS, required=False, allow_null=True)
    cost_quality_tradeoff = fields.IntegerField(min_value=0, max_value=10, required=False, allow_null=True)


class AutoRouterPluginSerializer(AutoBetaRouterPluginSerializer):
    id = fields.ChoiceField(choices=["auto-router"])
    pin_model = fields.BooleanField(required=False, default=False)


class ModerationPluginSerializer(PluginBase):  # `enabled: false` must reach the stage, not be dropped
    id = fields.ChoiceField(choices=["moderation"])


class WebPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["web"])
    engine = fields.CharField(required=False, allow_null=True)
    include_domains = fields.ListField(child=fields.CharField(max_length=1024), required=False, max_length=100)
    exclude_domains = fields.ListField(child=fields.CharField(max_length=1024), required=False, max_length=100)
    max_results = fields.IntegerField(min_value=1, max_value=100, required=False)
    search_prompt = fields.CharField(required=False, allow_null=True)


class WebFetchPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["web-fetch"])
    max_uses = fields.IntegerField(min_value=1, max_value=50, required=False)
    max_content_tokens = fields.IntegerField(min_value=1, required=False)
    allowed_domains = fields.ListField(child=fields.CharField(max_length=1024), required=False, max_length=100)
    blocked_domains = fields.ListField(child=fields.CharField(max_length=1024), required=False, max_length=100)


class FileParserPdfSerializer(PlannedSerializer):
    engine = fields.ChoiceField(choices=["mistral-ocr", "native", "cloudflare-ai", "pdf-text"], required=False)


class FileParserPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["file-parser"])
    pdf = FileParserPdfSerializer(required=False)


class ResponseHealingPluginSerializer(PluginBase):
    """Repairs a non-streaming answer's JSON (text.format json_object / json_schema: fences, prose, trailing
    commas, unquoted keys, single quotes, unbalanced brackets) and checks it against the schema; an answer that
    cannot be repaired or was cut by max_output_tokens is returned unchanged. Streams and requests without a
    JSON text.format are not healed. The pipeline entry (response_plugin, response-healing) says what was done."""

    id = fields.ChoiceField(choices=["response-healing"])


class ContextCompressionPluginSerializer(PluginBase):
    """Middle-out: an input longer than every endpoint's context loses its middle turns (system prompt, start,
    end and function call/output pairs kept) until it fits. On by default when every endpoint of the requested
    models has a context of 8,192 tokens or less; enabled: false keeps the 400 context_length_exceeded."""

    id = fields.ChoiceField(choices=["context-compression"])
    engine = fields.ChoiceField(choices=["middle-out"], required=False, default="middle-out")


class ParetoRouterPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["pareto-router"])
    max_price = fields.FloatField(min_value=0, required=False, allow_null=True)
    min_coding_score = fields.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    price_source = fields.ChoiceField(choices=["prompt", "weighted_avg"], required=False, default="prompt")


class FusionToolSerializer(PlannedSerializer):
    type = fields.CharField()
    parameters = fields.DictField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if refused := panel_tools_error([attrs]):
            raise serializers.ValidationError(refused.removeprefix("[0] ").removeprefix("[0]."))
        return attrs


class FusionPluginSerializer(PluginBase):
    id = fields.ChoiceField(choices=["fusion"])
    analysis_models = fields.ListField(child=fields.CharField(), min_length=1, max_length=8, required=False)
    model = fields.CharField(required=False)
    max_tool_calls = fields.IntegerField(min_value=1, max_value=16, required=False, default=4)
    preset = fields.ChoiceField(choices=["general-high", "general-budget", "general-fast"], required=False)
    tools = FusionToolSerializer(many=True, required=False, max_length=8)  # type: ignore[call-arg]  # for the ListSerializer


PLUGIN_SERIALIZERS: dict[str, type[serializers.Serializer[Any]]] = {
    "auto-router": AutoRouterPluginSerializer,
    "auto-beta-router": AutoBetaRouterPluginSerializer,
    "moderation": ModerationPluginSerializer,
    "web": WebPluginSerializer,
    "web-fetch": WebFetchPluginSerializer,
    "file-parser": FileParserPluginSerializer,
    "response-healing": ResponseHealingPluginSerializer,
    "context-compression": ContextCompressionPluginSerializer,
    "pareto-router": ParetoRouterPluginSerializer,
    "fusion": FusionPluginSerializer,
}


def unknown_fields(serializer: serializers.Serializer[Any], data: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys of `data` (and of its nested objects) that the serializer has no field for, as dotted names."""
    found = []
    for name, value in data.items():
        field = serializer.fields.get(name)
        if field is None:
            found.append(prefix + name)
        elif isinstance(field, serializers.Serializer) and isinstance(value, dict):
            found += unknown_fields(field, value, prefix=f"{prefix}{name}.")
    return sorted(found)


class PluginEntrySchema(OpenApiSerializerExtension):
    """A plugin entry, and its nested objects, take their own fields only (`unknown_fields` refuses any other, a 400
    naming it, here and in the account's plugin defaults): the schema says `additionalProperties: false` too."""

    target_class: type[serializers.Serializer[Any]] = PluginBase
    match_subclasses = True

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


class FileParserPdfSchema(PluginEntrySchema):
    target_class = FileParserPdfSerializer


PLUGIN_ENTRY_SCHEMA = PolymorphicProxySerializer(
    component_name="Plugin", serializers={**PLUGIN_SERIALIZERS}, resource_type_field_name="id", many=False
)


class PluginsField(serializers.Field[Any, Any, Any, Any]):
    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of plugin objects")
        check_count(data, MAX_PLUGINS, "plugins")
        cleaned, errors = [], {}
        seen: dict[str, int] = {}
        for index, plugin in enumerate(data):
            if not isinstance(plugin, dict) or "id" not in plugin:
                errors[index] = {"id": "is required"}
                continue
            serializer_class = PLUGIN_SERIALIZERS.get(plugin["id"]) if isinstance(plugin["id"], str) else None
            if serializer_class is None:
                errors[index] = {
                    "id": f'"{plugin["id"]}" is not a known plugin; expected one of {sorted(PLUGIN_SERIALIZERS)}'
                }
                continue
            if plugin["id"] in seen:  # which entry would win is a guess: refused
                errors[index] = {"id": f'"{plugin["id"]}" is given twice (plugins[{seen[plugin["id"]]}] too)'}
                continue
            seen[plugin["id"]] = index
            serializer = serializer_class(data=plugin)
            unknown = unknown_fields(serializer, plugin)
            if unknown:  # a field the plugin does not have would be accepted and ignored: refused
                errors[index] = {name: f'is not a field of the "{plugin["id"]}" plugin' for name in unknown}
                continue
            if serializer.is_valid():
                cleaned.append(dict(serializer.validated_data))
            else:
                errors[index] = serializer.errors
        if errors:
            raise serializers.ValidationError([errors.get(i, {}) for i in range(len(data))])
        return cleaned


class PluginsFieldSchema(OpenApiSerializerFieldExtension):
    """`plugins`: an array of `Plugin` entries (discriminated by `id`), at most MAX_PLUGINS of them, as
    PluginsField checks."""

    target_class = PluginsField

    def map_serializer_field(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        entry = auto_schema.resolve_serializer(PLUGIN_ENTRY_SCHEMA, direction)
        return {"type": "array", "items": entry.ref, "maxItems": MAX_PLUGINS}
