"""`stop_server_tools_when`: the conditions that stop the server-tool loop."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from responses_api.validation.checks import raise_indexed

# `stop_server_tools_when`: conditions (any one stops the server-tool loop), by type: the field each needs.
STOP_CONDITIONS = {
    "step_count_is": ("step_count", int),
    "has_tool_call": ("tool_name", str),
    "max_tokens_used": ("max_tokens", int),
    "max_cost": ("max_cost_in_dollars", float),
    "finish_reason_is": ("reason", str),
}
STOP_CONDITIONS_SCHEMA = {
    "type": "array",
    "maxItems": 16,
    "items": {
        "oneOf": [
            {
                "type": "object",
                "required": ["type", name],
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string", "enum": [kind]},
                    name: {"type": "string", "minLength": 1, "maxLength": 200}
                    if kind_type is str
                    else {"type": "integer" if kind_type is int else "number", "minimum": 0},
                },
            }
            for kind, (name, kind_type) in STOP_CONDITIONS.items()
        ]
    },
    "description": "Conditions that stop the server-tool loop (any one); max_tool_calls is then not applied",
}


@extend_schema_field(STOP_CONDITIONS_SCHEMA)
class StopConditionsField(serializers.Field[Any, Any, Any, Any]):
    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list) or len(data) > 16:
            raise serializers.ValidationError("must be an array of at most 16 conditions")
        errors: dict[int, object] = {}
        for index, condition in enumerate(data):
            kind = condition.get("type") if isinstance(condition, dict) else None
            # Any JSON value may arrive as the type: an array or object is unhashable, so check it is a string
            # before looking it up (it raised TypeError, a 500).
            if not isinstance(kind, str) or kind not in STOP_CONDITIONS:
                errors[index] = {"type": f"must be one of {sorted(STOP_CONDITIONS)}"}
                continue
            name, kind_type = STOP_CONDITIONS[kind]
            value = condition.get(name)
            valid = (
                isinstance(value, str) and 0 < len(value) <= 200
                if kind_type is str
                else isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            )
            if kind_type is int and not isinstance(value, int):
                valid = False
            if not valid or set(condition) - {"type", name}:
                errors[index] = {name: f"{kind} takes {name} ({kind_type.__name__}, at least 0) and nothing else"}
        raise_indexed(errors)
        return [dict(condition) for condition in data]
