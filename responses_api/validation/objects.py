"""The nested configuration objects of a Responses request."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gateway import fields
from gateway.fields import is_json_number
from responses_api.validation.common import MSG_UNKNOWN_FIELD, PlannedSerializer

QUANTIZATIONS = ("int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown")
SORTS = ("price", "throughput", "latency", "exacto")
PERCENTILES = ("p50", "p75", "p90", "p99")
MAX_METADATA_PAIRS, MAX_IMAGE_CONFIG_KEYS = 16, 32


_PERCENTILE_VALUE = {"type": "number", "minimum": 0, "nullable": True}
PERCENTILE_FIELD_SCHEMA = {
    "oneOf": [
        {"type": "number", "minimum": 0},
        {
            "type": "object",
            "properties": {name: _PERCENTILE_VALUE for name in PERCENTILES},
            "additionalProperties": False,
        },
    ]
}


@extend_schema_field(PERCENTILE_FIELD_SCHEMA)
class PercentileField(serializers.Field[Any, Any, Any, Any]):
    """A number (the p50) or an object of percentiles."""

    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> dict[str, float]:
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
            if not all(value is None or is_json_number(value) for value in data.values()):
                raise serializers.ValidationError("percentile values must be finite numbers")
            values = {key: float(value) for key, value in data.items() if value is not None}
            if any(value < 0 for value in values.values()):
                raise serializers.ValidationError("percentile values must be >= 0")
            return values
        raise serializers.ValidationError("must be a number or an object of percentiles")


SORT_FIELD_SCHEMA = {
    "oneOf": [
        {"type": "string", "enum": list(SORTS)},
        {
            "type": "object",
            "properties": {
                "by": {"type": "string", "enum": list(SORTS), "nullable": True},
                "partition": {"type": "string", "enum": ["model", "none"], "nullable": True},
            },
            "additionalProperties": False,
        },
    ]
}


@extend_schema_field(SORT_FIELD_SCHEMA)
class SortField(serializers.Field[Any, Any, Any, Any]):
    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, str):
            if data not in SORTS:
                raise serializers.ValidationError(f'"{data}" is not valid; expected one of {list(SORTS)}')
            return {"by": data, "partition": "model"}
        if isinstance(data, dict):
            if unknown := [key for key in data if key not in ("by", "partition")]:
                raise serializers.ValidationError({str(key): MSG_UNKNOWN_FIELD for key in unknown})
            by, partition = data.get("by"), data.get("partition", "model")
            partition = "model" if partition is None else partition
            if by is not None and by not in SORTS:
                raise serializers.ValidationError({"by": f'"{by}" is not valid; expected one of {list(SORTS)}'})
            if partition not in ("model", "none"):
                raise serializers.ValidationError({"partition": 'must be "model" or "none"'})
            return {"by": by, "partition": partition}
        raise serializers.ValidationError("must be a sort name or an object {by, partition}")


class MaxPriceSerializer(PlannedSerializer):
    prompt = fields.FloatField(min_value=0, required=False, allow_null=True)
    completion = fields.FloatField(min_value=0, required=False, allow_null=True)
    image = fields.FloatField(min_value=0, required=False, allow_null=True)
    audio = fields.FloatField(min_value=0, required=False, allow_null=True)
    request = fields.FloatField(min_value=0, required=False, allow_null=True)


class ProviderPreferencesSerializer(PlannedSerializer):
    order = fields.ListField(child=fields.CharField(max_length=128), required=False, allow_null=True, max_length=100)
    allow_fallbacks = fields.BooleanField(required=False, allow_null=True, default=None)
    require_parameters = fields.BooleanField(required=False, allow_null=True, default=None)
    data_collection = fields.ChoiceField(choices=["allow", "deny"], required=False, allow_null=True)
    zdr = fields.BooleanField(required=False, allow_null=True, default=None)
    enforce_distillable_text = fields.BooleanField(required=False, allow_null=True, default=None)
    only = fields.ListField(child=fields.CharField(max_length=128), required=False, allow_null=True, max_length=100)
    ignore = fields.ListField(child=fields.CharField(max_length=128), required=False, allow_null=True, max_length=100)
    quantizations = fields.ListField(
        child=fields.ChoiceField(choices=QUANTIZATIONS), required=False, allow_null=True, max_length=len(QUANTIZATIONS)
    )
    sort = SortField(required=False, allow_null=True)
    max_price = MaxPriceSerializer(required=False, allow_null=True)
    preferred_min_throughput = PercentileField(required=False, allow_null=True)
    preferred_max_latency = PercentileField(required=False, allow_null=True)


class ReasoningSerializer(PlannedSerializer):
    effort = fields.ChoiceField(
        choices=["max", "xhigh", "high", "medium", "low", "minimal", "none"], required=False, allow_null=True
    )
    summary = fields.ChoiceField(choices=["auto", "concise", "detailed"], required=False, allow_null=True)
    mode = fields.ChoiceField(choices=["standard", "pro"], required=False, allow_null=True)
    context = fields.ChoiceField(  # type: ignore[assignment]  # the spec's field shadows Field.context
        choices=["auto", "all_turns", "current_turn"], required=False, allow_null=True
    )
    enabled = fields.BooleanField(required=False, allow_null=True, default=None)
    max_tokens = fields.IntegerField(min_value=0, required=False, allow_null=True)

    def validate_mode(self, value: str | None) -> str | None:
        if value not in (None, "standard"):
            raise serializers.ValidationError(f'"{value}" is not honoured by any provider this gateway routes to')
        return value

    def validate_context(self, value: str | None) -> str | None:
        if value not in (None, "auto"):
            raise serializers.ValidationError(
                f'"{value}" is not honoured: earlier reasoning is replayed where its provider can read it (auto)'
            )
        return value


class TextFormatSerializer(PlannedSerializer):
    type = fields.ChoiceField(choices=["text", "json_object", "json_schema"])
    name = fields.CharField(required=False, max_length=64)
    schema = fields.DictField(required=False)
    strict = fields.BooleanField(required=False, allow_null=True)
    description = fields.CharField(required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["type"] == "json_schema":
            missing = [name for name in ("name", "schema") if name not in attrs]
            if missing:
                raise serializers.ValidationError({name: "is required for json_schema" for name in missing})
        return attrs


class TextConfigSerializer(PlannedSerializer):
    format = TextFormatSerializer(required=False)
    verbosity = fields.ChoiceField(choices=["low", "medium", "high", "xhigh", "max"], required=False, allow_null=True)


class CacheControlSerializer(PlannedSerializer):
    type = fields.ChoiceField(choices=["ephemeral"])
    ttl = fields.CharField(required=False, max_length=16)


class PromptCacheOptionsSerializer(PlannedSerializer):
    mode = fields.ChoiceField(choices=["explicit"])
    ttl = fields.CharField(required=False, max_length=16)


class ResponseStreamOptionsSerializer(PlannedSerializer):
    include_obfuscation = fields.BooleanField(
        required=False, allow_null=True, help_text="Only false or null: this gateway never pads stream events"
    )

    def validate_include_obfuscation(self, value: bool | None) -> bool | None:
        if value:
            raise serializers.ValidationError("only false is supported: this gateway never pads stream events")
        return value


class DebugSerializer(PlannedSerializer):
    echo_upstream_body = fields.BooleanField(required=False, default=False)


class PromptSerializer(PlannedSerializer):
    id = fields.CharField(max_length=256)
    variables = fields.DictField(required=False, allow_null=True)
    version = fields.CharField(required=False, allow_null=True)


class TraceSerializer(PlannedSerializer):
    trace_id = fields.CharField(required=False, max_length=256)
    trace_name = fields.CharField(required=False, max_length=256)
    span_name = fields.CharField(required=False, max_length=256)
    generation_name = fields.CharField(required=False, max_length=256)
    parent_span_id = fields.CharField(required=False, max_length=256)


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": MAX_IMAGE_CONFIG_KEYS,
        "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "array", "items": {}}]},
    }
)
class ImageConfigField(fields.DictField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and len(data) > MAX_IMAGE_CONFIG_KEYS:
            raise serializers.ValidationError(f"at most {MAX_IMAGE_CONFIG_KEYS} keys")
        data = super().to_internal_value(data)
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float | list):
                raise serializers.ValidationError({key: "values must be a string, a number or an array"})
        return data


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": MAX_METADATA_PAIRS,
        "description": "At most 16 pairs; keys at most 64 characters, without brackets; values strings",
        "additionalProperties": {"type": "string", "maxLength": 512},
    }
)
class MetadataField(fields.DictField):
    child = fields.CharField(max_length=512, allow_blank=True, trim_whitespace=False)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and len(data) > MAX_METADATA_PAIRS:  # before any per-value work
            raise serializers.ValidationError(f"at most {MAX_METADATA_PAIRS} pairs")
        data = super().to_internal_value(data)
        for key in data:
            if len(key) > 64:
                raise serializers.ValidationError({key: "keys are at most 64 characters"})
            if "[" in key or "]" in key:
                raise serializers.ValidationError({key: "keys must not contain brackets"})
        return data
