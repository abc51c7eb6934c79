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


MSG_UNKNOWN_FIELD = "unknown field: not part of this API, or not one this gateway takes (nothing is ignored)"


def unknown_fields(serializer: serializers.Serializer, data: object, *, known: frozenset[str] = frozenset()) -> dict:
    """The keys of `data` that no field of `serializer` declares (besides `known`), through its nested serializers
    and lists of them: a nested error detail ({} when there are none). The front doors refuse them (a 400 naming
    each) instead of dropping them, as the APIs they mimic do."""
    if not isinstance(data, dict):
        return {}
    declared = serializer.fields
    errors: dict = {}
    for name, value in data.items():
        field = declared.get(name)
        if field is None:
            if name not in known:
                errors[name] = MSG_UNKNOWN_FIELD
            continue
        child = getattr(field, "child", None)
        if isinstance(field, serializers.Serializer):
            nested = unknown_fields(field, value)
        elif isinstance(child, serializers.Serializer) and isinstance(value, list):
            nested = {index: found for index, item in enumerate(value) if (found := unknown_fields(child, item))}
        else:
            continue
        if nested:
            errors[name] = nested
    return errors
