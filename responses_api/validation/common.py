"""Small building blocks shared by the request serializers."""

from typing import ClassVar

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


class LentFieldsSerializer(serializers.Serializer):
    """A request serializer whose bound field tree is built once and lent to one validation at a time: DRF
    deep-copies and binds every declared field (nested serializers' too) for each instance, most of a small
    request's validation CPU (2.5 ms of /chat/completions). A tree's fields keep the instance that built it as
    their parent: harmless, as no field of the front doors' requests reads its parent's state (no context, no
    partial, no instance). list pop/append are atomic, so no lock."""

    _spare_trees: ClassVar[dict[type, list]] = {}  # per class: a subclass's fields differ
    SPARE_TREES: ClassVar[int] = 16  # about the validations that run at once (they hold the GIL)

    @property
    def fields(self):  # DRF: a cached_property, here a lent tree
        tree = self.__dict__.get("_tree")
        if tree is None:
            try:
                tree = self._spare_trees.get(type(self), []).pop()
            except IndexError:
                tree = super().fields
            self.__dict__["_tree"] = tree
        return tree

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        try:
            return super().is_valid(raise_exception=raise_exception)
        finally:
            tree = self.__dict__.pop("_tree", None)
            spare = self._spare_trees.setdefault(type(self), [])
            if tree is not None and len(spare) < self.SPARE_TREES:
                spare.append(tree)
