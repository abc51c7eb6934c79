"""`tools` and `tool_choice`."""

import re

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
TOOL_SEARCH = "gateway:tool_search"
SERVER_TOOLS = tuple(f"gateway:{name}" for name in (
    "advisor", "subagent", "datetime", "files", "fusion", "image_generation", "search_models", "web_fetch",
    "web_search", "apply_patch", "bash", "shell", "tool_search"))
OTHER_TOOL_TYPES = (
    "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26", "file_search",
    "computer_use", "computer_use_preview", "code_interpreter", "mcp", "image_generation", "local_shell", "shell",
    "apply_patch", "custom", "namespace",
) + SERVER_TOOLS
TOOL_CHOICE_MODES = ("auto", "none", "required")


class FunctionToolSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["function"])
    name = serializers.CharField(max_length=128)
    description = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    parameters = serializers.DictField(required=False, allow_null=True)
    strict = serializers.BooleanField(required=False, allow_null=True)
    defer_loading = serializers.BooleanField(required=False, default=False)

    def validate_name(self, value):
        if not FUNCTION_NAME.match(value):
            raise serializers.ValidationError("may only contain letters, digits, _ . : - (at most 128)")
        return value

    def validate_parameters(self, value):
        if value is not None and value.get("type", "object") != "object":
            raise serializers.ValidationError('must be a JSON Schema with "type": "object"')
        return value


TOOLS_FIELD_SCHEMA = {'type': 'array',
     'items': {'type': 'object',
               'description': 'A function tool {type: function, name, description, parameters, strict, '
                              'defer_loading} or another tool kind identified by type',
               'properties': {'type': {'type': 'string'}},
               'required': ['type'],
               'additionalProperties': True}}


@extend_schema_field(TOOLS_FIELD_SCHEMA)
class ToolsField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of tool definitions")
        cleaned, errors = [], {}
        for index, tool in enumerate(data):
            if not isinstance(tool, dict):
                errors[index] = "must be an object"
                continue
            kind = tool.get("type")
            if kind == "function":
                serializer = FunctionToolSerializer(data=tool)
                if serializer.is_valid():
                    cleaned.append(dict(serializer.validated_data))
                else:
                    errors[index] = serializer.errors
            elif kind in OTHER_TOOL_TYPES:
                cleaned.append(dict(tool))
            else:
                errors[index] = {"type": f'"{kind}" is not a known tool type'}
        if errors:
            raise serializers.ValidationError([errors.get(i, {}) for i in range(len(data))])
        self._check_deferred(cleaned)
        names = [tool["name"] for tool in cleaned if tool["type"] == "function"]
        if len(names) != len(set(names)):
            raise serializers.ValidationError("function tool names must be unique")
        return cleaned

    @staticmethod
    def _check_deferred(tools: list[dict]) -> None:
        deferred = [tool for tool in tools if tool.get("defer_loading")]
        if not deferred:
            return
        if not any(tool["type"] == TOOL_SEARCH for tool in tools):
            raise serializers.ValidationError(f"defer_loading needs the {TOOL_SEARCH} server tool in tools")
        if all(tool.get("defer_loading") for tool in tools if tool["type"] == "function"):
            raise serializers.ValidationError("at least one function tool must not be deferred (defer_loading)")


TOOL_CHOICE_FIELD_SCHEMA = {'oneOf': [{'type': 'string', 'enum': ['auto', 'none', 'required']},
               {'type': 'object',
                'properties': {'type': {'type': 'string'}, 'name': {'type': 'string'}},
                'required': ['type'],
                'additionalProperties': True}]}


@extend_schema_field(TOOL_CHOICE_FIELD_SCHEMA)
class ToolChoiceField(serializers.Field):
    def to_representation(self, value):
        return value

    def to_internal_value(self, data):
        if isinstance(data, str):
            if data not in TOOL_CHOICE_MODES:
                raise serializers.ValidationError(f'"{data}" is not valid; expected one of {list(TOOL_CHOICE_MODES)}')
            return data
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise serializers.ValidationError("must be auto, none, required or an object with a type")
        if data["type"] == "function":
            if not isinstance(data.get("name"), str) or not data["name"]:
                raise serializers.ValidationError({"name": "is required for a function tool choice"})
            return {"type": "function", "name": data["name"]}
        if data["type"] == "allowed_tools":
            if data.get("mode", "auto") not in ("auto", "required") or not isinstance(data.get("tools"), list):
                raise serializers.ValidationError("allowed_tools needs mode auto|required and a tools array")
            return data
        if data["type"] in OTHER_TOOL_TYPES:
            return data
        raise serializers.ValidationError({"type": f'"{data["type"]}" is not a valid tool choice type'})
