"""The nested configuration objects of a Responses request."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

QUANTIZATIONS = ("int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown")
SORTS = ("price", "throughput", "latency", "exacto")
PERCENTILES = ("p50", "p75", "p90", "p99")


PERCENTILE_FIELD_SCHEMA = {'oneOf': [{'type': 'number'},
               {'type': 'object',
                'properties': {'p50': {'type': 'number'},
                               'p75': {'type': 'number'},
                               'p90': {'type': 'number'},
                               'p99': {'type': 'number'}}}]}


@extend_schema_field(PERCENTILE_FIELD_SCHEMA)
class PercentileField(serializers.Field):
    """A number (the p50) or an object of percentiles."""

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, bool):
            raise serializers.ValidationError("must be a number or an object of percentiles")
        if isinstance(data, int | float):
            if data < 0:
                raise serializers.ValidationError("must be >= 0")
            return {"p50": float(data)}
        if isinstance(data, dict):
            unknown = set(data) - set(PERCENTILES)
            if unknown:
                raise serializers.ValidationError(f"unknown percentiles {sorted(unknown)}; use {list(PERCENTILES)}")
            try:
                values = {key: float(value) for key, value in data.items() if value is not None}
            except (TypeError, ValueError):
                raise serializers.ValidationError("percentile values must be numbers")
            if any(value < 0 for value in values.values()):
                raise serializers.ValidationError("percentile values must be >= 0")
            return values
        raise serializers.ValidationError("must be a number or an object of percentiles")


SORT_FIELD_SCHEMA = {'oneOf': [{'type': 'string', 'enum': ['price', 'throughput', 'latency', 'exacto']},
               {'type': 'object',
                'properties': {'by': {'type': 'string', 'nullable': True},
                               'partition': {'type': 'string', 'enum': ['model', 'none'], 'nullable': True}}}]}


@extend_schema_field(SORT_FIELD_SCHEMA)
class SortField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, str):
            if data not in SORTS:
                raise serializers.ValidationError(f'"{data}" is not valid; expected one of {list(SORTS)}')
            return {"by": data, "partition": "model"}
        if isinstance(data, dict):
            by, partition = data.get("by"), data.get("partition") or "model"
            if by is not None and by not in SORTS:
                raise serializers.ValidationError({"by": f'"{by}" is not valid; expected one of {list(SORTS)}'})
            if partition not in ("model", "none"):
                raise serializers.ValidationError({"partition": 'must be "model" or "none"'})
            return {"by": by, "partition": partition}
        raise serializers.ValidationError("must be a sort name or an object {by, partition}")


class MaxPriceSerializer(serializers.Serializer):
    prompt = serializers.FloatField(min_value=0, required=False, allow_null=True)
    completion = serializers.FloatField(min_value=0, required=False, allow_null=True)
    image = serializers.FloatField(min_value=0, required=False, allow_null=True)
    audio = serializers.FloatField(min_value=0, required=False, allow_null=True)
    request = serializers.FloatField(min_value=0, required=False, allow_null=True)


class ProviderPreferencesSerializer(serializers.Serializer):
    order = serializers.ListField(child=serializers.CharField(max_length=128), required=False, allow_null=True,
                                  max_length=100)
    allow_fallbacks = serializers.BooleanField(required=False, allow_null=True, default=None)
    require_parameters = serializers.BooleanField(required=False, allow_null=True, default=None)
    data_collection = serializers.ChoiceField(choices=["allow", "deny"], required=False, allow_null=True)
    zdr = serializers.BooleanField(required=False, allow_null=True, default=None)
    enforce_distillable_text = serializers.BooleanField(required=False, allow_null=True, default=None)
    only = serializers.ListField(child=serializers.CharField(max_length=128), required=False, allow_null=True,
                                 max_length=100)
    ignore = serializers.ListField(child=serializers.CharField(max_length=128), required=False, allow_null=True,
                                   max_length=100)
    quantizations = serializers.ListField(child=serializers.ChoiceField(choices=QUANTIZATIONS), required=False,
                                          allow_null=True)
    sort = SortField(required=False, allow_null=True)
    max_price = MaxPriceSerializer(required=False, allow_null=True)
    preferred_min_throughput = PercentileField(required=False, allow_null=True)
    preferred_max_latency = PercentileField(required=False, allow_null=True)


class ReasoningSerializer(serializers.Serializer):
    effort = serializers.ChoiceField(choices=["max", "xhigh", "high", "medium", "low", "minimal", "none"],
                                     required=False, allow_null=True)
    summary = serializers.ChoiceField(choices=["auto", "concise", "detailed"], required=False, allow_null=True)
    mode = serializers.ChoiceField(choices=["standard", "pro"], required=False, allow_null=True)
    context = serializers.ChoiceField(choices=["auto", "all_turns", "current_turn"], required=False, allow_null=True)
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)
    max_tokens = serializers.IntegerField(min_value=0, required=False, allow_null=True)


class TextFormatSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["text", "json_object", "json_schema"])
    name = serializers.CharField(required=False, max_length=64)
    schema = serializers.DictField(required=False)
    strict = serializers.BooleanField(required=False, allow_null=True)
    description = serializers.CharField(required=False, allow_null=True)

    def validate(self, attrs):
        if attrs["type"] == "json_schema":
            missing = [name for name in ("name", "schema") if name not in attrs]
            if missing:
                raise serializers.ValidationError({name: "is required for json_schema" for name in missing})
        return attrs


class TextConfigSerializer(serializers.Serializer):
    format = TextFormatSerializer(required=False)
    verbosity = serializers.ChoiceField(choices=["low", "medium", "high", "xhigh", "max"], required=False,
                                        allow_null=True)


class CacheControlSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["ephemeral"])
    ttl = serializers.CharField(required=False, max_length=16)


class PromptCacheOptionsSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["explicit"])
    ttl = serializers.CharField(required=False, max_length=16)


class DebugSerializer(serializers.Serializer):
    echo_upstream_body = serializers.BooleanField(required=False, default=False)


class PromptSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=256)
    variables = serializers.DictField(required=False, allow_null=True)
    version = serializers.CharField(required=False, allow_null=True)


class TraceSerializer(serializers.Serializer):
    trace_id = serializers.CharField(required=False, max_length=256)
    trace_name = serializers.CharField(required=False, max_length=256)
    span_name = serializers.CharField(required=False, max_length=256)
    generation_name = serializers.CharField(required=False, max_length=256)
    parent_span_id = serializers.CharField(required=False, max_length=256)


class ImageConfigField(serializers.DictField):
    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float | list):
                raise serializers.ValidationError({key: "values must be a string, a number or an array"})
        return data


class MetadataField(serializers.DictField):
    child = serializers.CharField(max_length=512, allow_blank=True, trim_whitespace=False)

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if len(data) > 16:
            raise serializers.ValidationError("at most 16 pairs")
        for key in data:
            if len(key) > 64:
                raise serializers.ValidationError({key: "keys are at most 64 characters"})
            if "[" in key or "]" in key:
                raise serializers.ValidationError({key: "keys must not contain brackets"})
        return data
