"""The OpenAI embeddings request body (https://platform.openai.com/docs/api-reference/embeddings/create) plus this
gateway's routing fields, validated as strictly as POST /responses."""

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gateway import fields
from gateway.fields import INT_MAX
from responses_api.chat.validation import InlineChoiceField
from responses_api.validation.common import LentFieldsSerializer, unknown_fields
from responses_api.validation.objects import ProviderPreferencesSerializer
from responses_api.validation.request import MODEL_ID_MAX

MAX_INPUTS = 2048  # OpenAI's limit per request
MAX_DIMENSIONS = 65536
INPUT_SCHEMA = {
    "description": "A string, an array of strings, an array of token ids, or an array of token-id arrays "
    f"(at most {MAX_INPUTS} inputs; none empty)",
    "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "minItems": 1, "maxItems": MAX_INPUTS, "items": {"type": "string", "minLength": 1}},
        {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": INT_MAX}},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_INPUTS,
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
            },
        },
    ],
}


def _token(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT_MAX


def _text(value: str) -> str:
    if not value:
        raise serializers.ValidationError("must not be empty")
    if "\x00" in value:
        raise serializers.ValidationError("must not contain NUL characters")
    fields.check_text(value)
    return value


@extend_schema_field(INPUT_SCHEMA)
class EmbeddingInputField(serializers.Field):
    """The inputs as a list: each a text or a tuple of token ids."""

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, str):
            return [_text(data)]
        if not isinstance(data, list) or not data:
            raise serializers.ValidationError("must be a string or a non-empty array")
        if all(_token(value) for value in data):
            return [tuple(data)]
        if len(data) > MAX_INPUTS:
            raise serializers.ValidationError(f"at most {MAX_INPUTS} inputs (got {len(data)})")
        inputs: list = []
        errors: dict = {}
        for index, value in enumerate(data):
            if isinstance(value, str):
                try:
                    inputs.append(_text(value))
                except serializers.ValidationError as exc:
                    errors[index] = exc.detail
            elif isinstance(value, list) and value and all(_token(token) for token in value):
                inputs.append(tuple(value))
            else:
                errors[index] = "must be a non-empty string or a non-empty array of token ids"
        if errors:
            raise serializers.ValidationError(dict(list(errors.items())[:20]))
        return inputs


class EmbeddingCreateRequestSerializer(LentFieldsSerializer):
    """An embeddings request: the input, the model (or `models` to fall back through) and its options."""

    model = fields.CharField(required=False, max_length=MODEL_ID_MAX)
    models = fields.ListField(
        child=fields.CharField(max_length=MODEL_ID_MAX), required=False, min_length=1, max_length=16
    )
    input = EmbeddingInputField()
    encoding_format = InlineChoiceField(choices=["float", "base64"], required=False, default="float")
    dimensions = fields.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_DIMENSIONS)
    user = fields.CharField(required=False, max_length=256)
    session_id = fields.CharField(required=False, max_length=256)
    provider = ProviderPreferencesSerializer(required=False, allow_null=True)

    def validate(self, attrs):
        if unknown := unknown_fields(self, self.initial_data):
            raise serializers.ValidationError(unknown)
        if not attrs.get("model") and not attrs.get("models"):
            raise serializers.ValidationError({"model": "model (or models) is required"})
        return attrs


class EmbeddingCreateRequestSchema(OpenApiSerializerExtension):
    """`model` or `models` is required (the serializer's cross-field rule, in the schema)."""

    target_class = "responses_api.embeddings.validation.EmbeddingCreateRequestSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        schema["anyOf"] = [{"required": ["model"]}, {"required": ["models"]}]
        schema["additionalProperties"] = False  # a field the request does not take is refused, never dropped
        return schema
