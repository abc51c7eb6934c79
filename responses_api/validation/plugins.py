"""`plugins`: discriminated by `id`, with every field limit of the spec."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_PATTERNS, MAX_PATTERN_CHARS, MAX_PATTERNS_TOTAL = 1024, 1024, 65536
COST_TIERS = ("low", "medium", "high", "xhigh", "max")


def _patterns(value: list[str]) -> list[str]:
    if len(value) > MAX_PATTERNS:
        raise serializers.ValidationError(f"at most {MAX_PATTERNS} items")
    if any(len(item) > MAX_PATTERN_CHARS for item in value):
        raise serializers.ValidationError(f"each item at most {MAX_PATTERN_CHARS} characters")
    if sum(len(item) for item in value) > MAX_PATTERNS_TOTAL:
        raise serializers.ValidationError(f"at most {MAX_PATTERNS_TOTAL} characters in total")
    return value


class PluginBase(serializers.Serializer):
    id = serializers.CharField()
    enabled = serializers.BooleanField(required=False, default=True)


class AutoBetaRouterPluginSerializer(PluginBase):
    allowed_models = serializers.ListField(child=serializers.CharField(allow_blank=False), required=False,
                                           validators=[_patterns])
    excluded_models = serializers.ListField(child=serializers.CharField(allow_blank=False), required=False,
                                            validators=[_patterns])
    cost_tier = serializers.ChoiceField(choices=COST_TIERS, required=False, allow_null=True)
    cost_quality_tradeoff = serializers.IntegerField(min_value=0, max_value=10, required=False, allow_null=True)


class AutoRouterPluginSerializer(AutoBetaRouterPluginSerializer):
    pin_model = serializers.BooleanField(required=False, default=False)


class ModerationPluginSerializer(serializers.Serializer):
    id = serializers.CharField()


class WebPluginSerializer(PluginBase):
    engine = serializers.CharField(required=False, allow_null=True)
    include_domains = serializers.ListField(child=serializers.CharField(max_length=1024), required=False,
                                            max_length=100)
    exclude_domains = serializers.ListField(child=serializers.CharField(max_length=1024), required=False,
                                            max_length=100)
    max_results = serializers.IntegerField(min_value=1, max_value=100, required=False)
    search_prompt = serializers.CharField(required=False, allow_null=True)


class WebFetchPluginSerializer(PluginBase):
    max_uses = serializers.IntegerField(min_value=1, max_value=50, required=False)
    max_content_tokens = serializers.IntegerField(min_value=1, required=False)
    allowed_domains = serializers.ListField(child=serializers.CharField(max_length=1024), required=False,
                                            max_length=100)
    blocked_domains = serializers.ListField(child=serializers.CharField(max_length=1024), required=False,
                                            max_length=100)


class FileParserPdfSerializer(serializers.Serializer):
    engine = serializers.ChoiceField(choices=["mistral-ocr", "native", "cloudflare-ai", "pdf-text"], required=False)


class FileParserPluginSerializer(PluginBase):
    pdf = FileParserPdfSerializer(required=False)


class ResponseHealingPluginSerializer(PluginBase):
    pass


class ContextCompressionPluginSerializer(PluginBase):
    engine = serializers.ChoiceField(choices=["middle-out"], required=False, default="middle-out")


class ParetoRouterPluginSerializer(PluginBase):
    max_price = serializers.FloatField(min_value=0, required=False, allow_null=True)
    min_coding_score = serializers.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    price_source = serializers.ChoiceField(choices=["prompt", "weighted_avg"], required=False, default="prompt")


class FusionToolSerializer(serializers.Serializer):
    type = serializers.CharField()
    parameters = serializers.DictField(required=False)


class FusionPluginSerializer(PluginBase):
    analysis_models = serializers.ListField(child=serializers.CharField(), min_length=1, max_length=8,
                                            required=False)
    model = serializers.CharField(required=False)
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=16, required=False, default=4)
    preset = serializers.ChoiceField(choices=["general-high", "general-budget", "general-fast"], required=False)
    tools = FusionToolSerializer(many=True, required=False, max_length=8)


PLUGIN_SERIALIZERS = {
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


PLUGINS_FIELD_SCHEMA = {'type': 'array',
     'items': {'type': 'object',
               'description': 'A plugin, discriminated by id: auto-router, auto-beta-router, moderation, web, '
                              'web-fetch, file-parser, response-healing, context-compression, pareto-router, '
                              'fusion',
               'properties': {'id': {'type': 'string'}, 'enabled': {'type': 'boolean'}},
               'required': ['id'],
               'additionalProperties': True}}


@extend_schema_field(PLUGINS_FIELD_SCHEMA)
class PluginsField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of plugin objects")
        cleaned, errors = [], {}
        for index, plugin in enumerate(data):
            if not isinstance(plugin, dict) or "id" not in plugin:
                errors[index] = {"id": "is required"}
                continue
            serializer_class = PLUGIN_SERIALIZERS.get(plugin["id"])
            if serializer_class is None:
                errors[index] = {"id": f'"{plugin["id"]}" is not a known plugin; expected one of '
                                       f"{sorted(PLUGIN_SERIALIZERS)}"}
                continue
            serializer = serializer_class(data=plugin)
            if serializer.is_valid():
                cleaned.append(dict(serializer.validated_data))
            else:
                errors[index] = serializer.errors
        if errors:
            raise serializers.ValidationError([errors.get(i, {}) for i in range(len(data))])
        return cleaned
