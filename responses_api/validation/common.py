"""Small building blocks shared by the request serializers."""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import Direction, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField, empty, get_error_detail
from rest_framework.utils.serializer_helpers import BindingDict
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from gateway import fields

if TYPE_CHECKING:  # drf_spectacular.openapi imports DRF's views, which import the API settings' modules
    from drf_spectacular.openapi import AutoSchema

ANY_FIELD_SCHEMA = {"description": "Any JSON value"}


@extend_schema_field(ANY_FIELD_SCHEMA)
class AnyField(serializers.Field[Any, Any, Any, Any]):
    """Any JSON value, documented as such."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class LongTextField(fields.CharField):
    """A JSON string that may be long (instructions). DRF's CharField also runs ProhibitSurrogateCharactersValidator,
    a Python loop over every character (0.1 ms for 4,000 characters); it can never refuse here: the strict
    CharField's check_text has already refused unpaired surrogates, with the gateway's message, before validators
    run. So it is dropped."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)]


def one_of(value: object, allowed: tuple[object, ...], field: str) -> None:
    if value not in allowed:
        raise serializers.ValidationError({field: f'"{value}" is not a valid choice; expected one of {list(allowed)}'})


def require_dict(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise serializers.ValidationError(f"{what} must be an object")
    return value


def require_list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise serializers.ValidationError(f"{what} must be an array")
    return value


# The field methods whose behaviour for a plain dict body, and for an absent value, is DRF's own: a field that keeps
# them is read with dict.get, and skipped or given its constant default when absent without calling it.
PLAIN_GET_VALUES = frozenset(
    {
        serializers.Field.get_value,
        serializers.Serializer.get_value,
        serializers.ListSerializer.get_value,
        serializers.ListField.get_value,
        serializers.DictField.get_value,
        serializers.JSONField.get_value,
        fields.CharField.get_value,  # gateway.fields: every strict field reads the body as sent
    }
)
PLAIN_RUNS = frozenset(
    {
        serializers.Field.run_validation,
        serializers.CharField.run_validation,
        serializers.Serializer.run_validation,
        serializers.ListSerializer.run_validation,
    }
)
RUN = empty  # an absent field whose own machinery must answer (required, a callable default, an unknown override)
SKIP = object()  # an absent field DRF would skip (SkipField): not required, no default


class FieldPlan:
    """What `to_internal_value` needs of each writable field, worked out once per bound field tree: its name, how
    to read it, what an absent value gives (skip, a constant default, or the field's own answer), its
    `validate_<name>` method, its key in the result. Read only after it is built, so validations can share it."""

    __slots__ = ("entries", "read_only")

    def __init__(
        self, serializer: serializers.Serializer[Any], bound: Mapping[str, serializers.Field[Any, Any, Any, Any]]
    ) -> None:
        entries = []
        for name, field in bound.items():
            if field.read_only:
                continue
            kind = type(field)
            getter = None if kind.get_value in PLAIN_GET_VALUES else field.get_value
            absent: object = RUN
            if (
                kind.run_validation in PLAIN_RUNS
                and kind.validate_empty_values is serializers.Field.validate_empty_values
                and kind.get_default is serializers.Field.get_default
                and not field.required
            ):
                absent = SKIP if field.default is empty else RUN if callable(field.default) else field.default
            method = f"validate_{name}"
            check = method if getattr(type(serializer), method, None) is not None else None
            key = name if field.source_attrs == [name] else None
            entries.append((name, field, getter, absent, check, key))
        self.entries = tuple(entries)
        self.read_only = len(entries) != len(bound)


# (No docstrings on the serializer bases below: drf-spectacular describes a serializer by the first docstring of its
# MRO, so theirs would become the API description of every request object.)
#
# DRF's `to_internal_value` for a JSON object, from a FieldPlan: an absent optional field without a default costs a
# dict lookup (DRF runs its validate_empty_values and raises SkipField: most of a request's fields are absent), an
# absent field with a constant default takes it without its machinery; every present value goes through its field's
# run_validation and `validate_<name>` as before, so values and errors are DRF's. Any other input (not a dict, a
# partial update) takes DRF's own path.
class PlannedSerializer(serializers.Serializer[Any]):
    def field_plan(self) -> FieldPlan:
        bound = self.fields  # a lent tree brings its plan (LentFieldsSerializer)
        plan = self.__dict__.get("_plan")
        if plan is None:
            plan = self.__dict__["_plan"] = FieldPlan(self, bound)
        return plan

    def to_internal_value(self, data: Any) -> Any:
        if type(data) is not dict or getattr(self.root, "partial", False):
            return super().to_internal_value(data)
        ret: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for name, field, getter, absent, check, key in self.field_plan().entries:
            value = data.get(name, empty) if getter is None else getter(data)
            if value is empty and absent is SKIP:
                continue
            try:
                value = field.run_validation(value) if value is not empty or absent is RUN else absent
                if check is not None:
                    value = getattr(self, check)(value)
            except ValidationError as exc:
                errors[name] = exc.detail
            except DjangoValidationError as exc:
                errors[name] = get_error_detail(exc)
            except SkipField:
                pass
            else:
                if key is None:
                    self.set_value(ret, field.source_attrs, value)
                else:
                    ret[key] = value
        if errors:
            raise ValidationError(errors)
        return ret

    def run_validators(self, value: Any) -> None:
        if self.validators or self.field_plan().read_only:  # else DRF merges defaults into a copy for nothing
            super().run_validators(value)


# A serializer whose bound field tree (with its FieldPlan) is built once and lent to one validation at a time: see
# LentFieldsSerializer, whose docstring (the API description of its subclasses, kept as it was) says why. The plugin
# entries' serializers (one instance per entry) lend theirs too. It replaces DRF's cached `fields` property, a reach
# into DRF kept because its interleaved A/B saves more than 10% of the gateway's CPU per request
# (benchmarks/RESULTS.md, "Library internals").
class LendingSerializer(PlannedSerializer):
    _spare_trees: ClassVar[dict[type, list[tuple[BindingDict, FieldPlan | None]]]] = {}  # per class: fields differ
    SPARE_TREES: ClassVar[int] = 16  # about the validations that run at once (they hold the GIL)

    @property
    def fields(self) -> BindingDict:  # DRF: a cached_property, here a lent tree
        tree = self.__dict__.get("_tree")
        if tree is None:
            try:
                tree, self.__dict__["_plan"] = self._spare_trees.get(type(self), []).pop()
            except IndexError:
                tree = super().fields
            self.__dict__["_tree"] = tree
        return tree

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        try:
            return super().is_valid(raise_exception=raise_exception)
        finally:
            tree = self.__dict__.pop("_tree", None)
            plan = self.__dict__.pop("_plan", None)
            spare = self._spare_trees.setdefault(type(self), [])
            if tree is not None and len(spare) < self.SPARE_TREES:
                spare.append((tree, plan))


class LentFieldsSerializer(LendingSerializer):
    """A request serializer whose bound field tree is built once and lent to one validation at a time: DRF
    deep-copies and binds every declared field (nested serializers' too) for each instance, most of a small
    request's validation CPU (2.5 ms of /chat/completions). A tree's fields keep the instance that built it as
    their parent: harmless, as no field of the front doors' requests reads its parent's state (no context, no
    partial, no instance). list pop/append are atomic, so no lock."""


MSG_UNKNOWN_FIELD = "unknown field: not part of this API, or not one this gateway takes (nothing is ignored)"


class ClosedObjectSchema(OpenApiSerializerExtension):
    """A nested object of a door that refuses unknown fields (`unknown_fields` walks its nested serializers): its
    schema says `additionalProperties: false` too. Subclass with the serializer's dotted path as `target_class`;
    only for serializers every operation using them checks with `unknown_fields` (all the front doors do)."""

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


def unknown_fields(
    serializer: serializers.Serializer[Any], data: object, *, known: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The keys of `data` that no field of `serializer` declares (besides `known`), through its nested serializers
    and lists of them: a nested error detail ({} when there are none). The front doors refuse them (a 400 naming
    each) instead of dropping them, as the APIs they mimic do."""
    if not isinstance(data, dict):
        return {}
    declared = serializer.fields
    errors: dict[str, Any] = {}
    for name, value in data.items():
        field = declared.get(name)
        if field is None:
            if name not in known:
                errors[name] = MSG_UNKNOWN_FIELD
            continue
        child = getattr(field, "child", None)
        nested: dict[str, Any] | dict[int, dict[str, Any]]  # an object's unknown keys, or a list's by index
        if isinstance(field, serializers.Serializer):
            nested = unknown_fields(field, value)
        elif isinstance(child, serializers.Serializer) and isinstance(value, list):
            nested = {index: found for index, item in enumerate(value) if (found := unknown_fields(child, item))}
        else:
            continue
        if nested:
            errors[name] = nested
    return errors
