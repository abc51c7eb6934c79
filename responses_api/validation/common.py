"""Small building blocks shared by the request serializers."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

ANY_FIELD_SCHEMA = {"description": "Any JSON value"}


@extend_schema_field(ANY_FIELD_SCHEMA)
class AnyField(serializers.Field):
    """Any JSON value, documented as such."""

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


def one_of(value, allowed: tuple, field: str):
    if value not in allowed:
        raise serializers.ValidationError({field: f'"{value}" is not a valid choice; expected one of {list(allowed)}'})


def require_dict(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise serializers.ValidationError(f"{what} must be an object")
    return value


def require_list(value, what: str) -> list:
    if not isinstance(value, list):
        raise serializers.ValidationError(f"{what} must be an array")
    return value
