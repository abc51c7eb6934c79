"""`input`: a string, or an array of input items (messages with content parts, function calls and
their outputs, reasoning, replayed assistant output)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.common import AnyField

ROLES = ("user", "system", "developer", "assistant")
DETAILS = ("auto", "high", "low", "original")
UNSUPPORTED_ITEMS = {
    "item_reference": "item references need stored responses; this endpoint is stateless: send the items themselves",
}


class InputTextPartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["input_text"])
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)
    cache_control = serializers.DictField(required=False)

    def validate_cache_control(self, value):
        if value.get("type") != "ephemeral":
            raise serializers.ValidationError('type must be "ephemeral"')
        return value


class InputImagePartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["input_image"])
    image_url = serializers.CharField(required=False, allow_null=True)
    file_id = serializers.CharField(required=False, allow_null=True)
    detail = serializers.ChoiceField(choices=DETAILS, required=False, default="auto")

    def validate(self, attrs):
        if not attrs.get("image_url") and not attrs.get("file_id"):
            raise serializers.ValidationError({"image_url": "image_url or file_id is required"})
        if attrs.get("image_url") and not attrs["image_url"].startswith(("http://", "https://", "data:")):
            raise serializers.ValidationError({"image_url": "must be an http(s) URL or a data: URL"})
        return attrs


class InputFilePartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["input_file"])
    file_id = serializers.CharField(required=False, allow_null=True)
    file_data = serializers.CharField(required=False, allow_null=True)
    file_url = serializers.URLField(required=False, allow_null=True)
    filename = serializers.CharField(required=False, allow_null=True, max_length=1024)

    def validate(self, attrs):
        if not any(attrs.get(name) for name in ("file_id", "file_data", "file_url")):
            raise serializers.ValidationError({"file_data": "one of file_id, file_data or file_url is required"})
        return attrs


class OutputTextPartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["output_text"])
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)
    annotations = serializers.ListField(child=serializers.DictField(), required=False)
    logprobs = serializers.ListField(required=False)


class RefusalPartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["refusal"])
    refusal = serializers.CharField(allow_blank=True)


PART_SERIALIZERS = {
    "input_text": InputTextPartSerializer,
    "input_image": InputImagePartSerializer,
    "input_file": InputFilePartSerializer,
    "output_text": OutputTextPartSerializer,
    "refusal": RefusalPartSerializer,
}
UNSUPPORTED_PARTS = ("input_audio", "input_video")


def validate_parts(parts: list, role: str) -> list[dict]:
    errors, cleaned = {}, []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            errors[index] = "must be an object"
            continue
        kind = part.get("type")
        if kind in UNSUPPORTED_PARTS:
            errors[index] = {"type": f"{kind} content is not supported by any provider this gateway serves"}
            continue
        serializer_class = PART_SERIALIZERS.get(kind)
        if serializer_class is None:
            errors[index] = {"type": f'"{kind}" is not a valid content part type; expected one of '
                                     f"{sorted(PART_SERIALIZERS)}"}
            continue
        if role != "assistant" and kind in ("output_text", "refusal"):
            errors[index] = {"type": f"{kind} parts belong to assistant messages"}
            continue
        serializer = serializer_class(data=part)
        if serializer.is_valid():
            cleaned.append(serializer.validated_data)
        else:
            errors[index] = serializer.errors
    if errors:
        raise serializers.ValidationError({"content": [errors.get(i, {}) for i in range(len(parts))]})
    return cleaned


class MessageItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["message"], required=False)
    id = serializers.CharField(required=False, allow_null=True)
    role = serializers.ChoiceField(choices=ROLES)
    content = AnyField(allow_null=True)
    status = serializers.CharField(required=False, allow_null=True)
    phase = serializers.ChoiceField(choices=["commentary", "final_answer"], required=False, allow_null=True)

    def validate(self, attrs):
        content = attrs.get("content")
        if content is None:
            attrs["content"] = []
        elif isinstance(content, str):
            part_type = "output_text" if attrs["role"] == "assistant" else "input_text"
            attrs["content"] = [{"type": part_type, "text": content}]
        elif isinstance(content, list):
            attrs["content"] = validate_parts(content, attrs["role"])
        else:
            raise serializers.ValidationError({"content": "must be a string, an array of content parts or null"})
        return attrs


class FunctionCallItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["function_call"])
    id = serializers.CharField(required=False, allow_null=True)
    call_id = serializers.CharField(max_length=256)
    name = serializers.CharField(max_length=256)
    arguments = serializers.CharField(allow_blank=True, trim_whitespace=False)
    status = serializers.CharField(required=False, allow_null=True)
    namespace = serializers.CharField(required=False, allow_null=True)


class FunctionCallOutputItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["function_call_output"])
    id = serializers.CharField(required=False, allow_null=True)
    call_id = serializers.CharField(max_length=256)
    output = AnyField()
    status = serializers.CharField(required=False, allow_null=True)

    def validate_output(self, value):
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            texts = [part.get("text", "") for part in value if isinstance(part, dict)
                     and part.get("type") in ("input_text", "output_text")]
            if len(texts) != len(value):
                raise serializers.ValidationError("only text parts are supported in a function call output")
            return "".join(texts)
        raise serializers.ValidationError("must be a string or an array of text parts")


class SummaryTextSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["summary_text"])
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)


class ReasoningTextSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["reasoning_text"])
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)


class ReasoningItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["reasoning"])
    id = serializers.CharField(required=False, allow_null=True)
    summary = SummaryTextSerializer(many=True, required=False, default=list)
    content = ReasoningTextSerializer(many=True, required=False, allow_null=True)
    encrypted_content = serializers.CharField(required=False, allow_null=True)
    signature = serializers.CharField(required=False, allow_null=True)
    format = serializers.CharField(required=False, allow_null=True)
    status = serializers.CharField(required=False, allow_null=True)


ITEM_SERIALIZERS = {
    "message": MessageItemSerializer,
    "function_call": FunctionCallItemSerializer,
    "function_call_output": FunctionCallOutputItemSerializer,
    "reasoning": ReasoningItemSerializer,
}


INPUT_FIELD_SCHEMA = {'oneOf': [{'type': 'string', 'description': 'One user message'},
               {'type': 'array',
                'items': {'type': 'object',
                          'description': 'Input item: message (role user|system|developer|assistant, content '
                                         'string or parts '
                                         'input_text/input_image/input_file/output_text/refusal), function_call, '
                                         'function_call_output or reasoning',
                          'properties': {'type': {'type': 'string'}},
                          'additionalProperties': True}}]}


@extend_schema_field(INPUT_FIELD_SCHEMA)
class InputField(serializers.Field):
    """A string (one user message) or an array of input items, each validated by its `type`."""

    default_error_messages = {"invalid": "input must be a string or an array of input items"}

    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, str):
            return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": data}]}]
        if not isinstance(data, list):
            self.fail("invalid")
        cleaned, errors = [], {}
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                errors[index] = "must be an object"
                continue
            kind = item.get("type") or ("message" if "role" in item else None)
            if kind in UNSUPPORTED_ITEMS:
                errors[index] = {"type": UNSUPPORTED_ITEMS[kind]}
                continue
            serializer_class = ITEM_SERIALIZERS.get(kind)
            if serializer_class is None:
                errors[index] = {"type": f'"{kind}" is not a supported input item type; expected one of '
                                         f"{sorted(ITEM_SERIALIZERS)}"}
                continue
            serializer = serializer_class(data=item)
            if serializer.is_valid():
                cleaned.append({**serializer.validated_data, "type": kind})
            else:
                errors[index] = serializer.errors
        if errors:
            raise serializers.ValidationError([errors.get(i, {}) for i in range(len(data))])
        return cleaned
