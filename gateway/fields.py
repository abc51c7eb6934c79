"""The strict field set every request serializer uses: JSON types are taken as sent, never coerced.

DRF's fields coerce (`"yes"` and `1` are booleans, `"16"` and `1e2` integers, `true` a float, `123` a
string). The API speaks JSON, so here a boolean is a JSON boolean, a string a JSON string, an integer a
JSON integer and a number finite; every integer is bounded (PostgreSQL `integer` by default) so nothing
overflows a column or a statement. Strings must be valid Unicode (no lone surrogates, no NUL). A blank
string is refused unless `allow_blank`, and the schema says so (`minLength: 1`); whitespace is kept as
sent, so the schema's "non-empty" and the validation's "non-blank" are the same rule.

Query parameters arrive as text: `QueryIntegerField` and `QueryBooleanField` accept exactly the text forms
of a JSON integer and of `true`/`false`. All fields read a present-but-empty query parameter as the
empty string (DRF treats it as absent), so `?limit=` is a 400 like the schema says.

Import the module, not the names: `from gateway import fields` then `fields.CharField(...)`.
"""

import datetime
import math
import re
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import Direction, extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.validators import ProhibitSurrogateCharactersValidator

if TYPE_CHECKING:  # drf_spectacular.openapi imports DRF's views, which import the API settings' modules
    from drf_spectacular.openapi import AutoSchema

INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # PostgreSQL `integer`
MSG_BOOLEAN = "must be a JSON boolean (true or false)"
MSG_STRING = "must be a JSON string"
MSG_INTEGER = "must be a JSON integer"
MSG_NUMBER = "must be a finite JSON number"
MSG_OBJECT = "must be a JSON object"
MSG_ARRAY = "must be a JSON array"
MSG_UNICODE = "must be valid Unicode text (no unpaired surrogates)"
MSG_UNKNOWN_FIELD = "unknown field: not one this operation takes (nothing sent is ignored)"
MSG_READ_ONLY_FIELD = "read-only: set by the gateway or fixed when the record is made; it cannot be changed here"
MSG_UUID = "must be a UUID string (8-4-4-4-12 hexadecimal digits)"
UUID_TEXT = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
QUERY_INTEGER = re.compile(r"^-?[0-9]{1,19}$")


def is_json_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_json_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) and math.isfinite(value)


def check_text(value: str) -> None:
    """Refuse text PostgreSQL and UTF-8 cannot carry; cheap for ASCII (the common case)."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise serializers.ValidationError(MSG_UNICODE) from None


class _PlainGetValue:
    """Read a field as sent: a present empty query parameter is "" (DRF's HTML-form handling drops it)."""

    field_name: str | None  # set by DRF's Field.bind

    def get_value(self, dictionary: Mapping[Any, Any]) -> Any:
        return dictionary.get(self.field_name, empty)


class BooleanField(_PlainGetValue, serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if data is True or data is False:
            return data
        raise serializers.ValidationError(MSG_BOOLEAN)


class CharField(_PlainGetValue, serializers.CharField):
    """A JSON string; non-blank (`minLength: 1`) unless allow_blank; whitespace kept."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        if not kwargs.get("allow_blank", False) and kwargs.get("min_length") is None:
            kwargs["min_length"] = 1
        super().__init__(**kwargs)
        # DRF's surrogate check walks the string a character at a time in Python (about 0.1 ms per 4,000
        # characters, on every prompt); check_text in to_internal_value, which runs first, refuses the same strings.
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError(MSG_STRING)
        check_text(data)
        return data


class ChoiceField(_PlainGetValue, serializers.ChoiceField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError(MSG_STRING)
        return super().to_internal_value(data)


class IntegerField(_PlainGetValue, serializers.IntegerField):
    """A JSON integer within [min_value, max_value], by default PostgreSQL's `integer` range."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("max_value") is None:
            kwargs["max_value"] = INT_MAX
        if kwargs.get("min_value") is None:
            kwargs["min_value"] = INT_MIN
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if not is_json_integer(data):
            raise serializers.ValidationError(MSG_INTEGER)
        return data


class QueryIntegerField(IntegerField):
    """An integer query parameter: decimal digits only (no `1e2`, `+1`, `1.0`), bounded like IntegerField."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not QUERY_INTEGER.match(data):
            raise serializers.ValidationError("must be an integer")
        return int(data)


class QueryBooleanField(BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if data in ("true", "false"):
            return data == "true"
        raise serializers.ValidationError('must be "true" or "false"')


class FloatField(_PlainGetValue, serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if not is_json_number(data):
            raise serializers.ValidationError(MSG_NUMBER)
        return float(data)


@extend_schema_field({"type": "number"})
class MoneyField(_PlainGetValue, serializers.DecimalField):
    """A finite JSON number stored as a Decimal (credits in USD); decimal strings are not accepted."""

    def to_internal_value(self, data: Any) -> Decimal:
        if not is_json_number(data):
            raise serializers.ValidationError(MSG_NUMBER)
        if self.max_value is not None and data > self.max_value:
            raise serializers.ValidationError(f"must be at most {self.max_value}")
        if self.min_value is not None and data < self.min_value:  # before quantize: a huge negative overflows it
            raise serializers.ValidationError(f"must be at least {self.min_value}")
        step = Decimal(1).scaleb(-(self.decimal_places or 0))
        try:
            value = Decimal(repr(data)).quantize(step)
        except ArithmeticError:  # decimal.InvalidOperation: more digits than the context holds
            raise serializers.ValidationError(f"must have at most {self.max_digits} digits") from None
        return super().to_internal_value(str(value))

    def to_representation(self, value: Decimal) -> float:  # type: ignore[override]  # a JSON number, not DRF's string
        return float(value)


class UUIDField(_PlainGetValue, serializers.UUIDField):
    def to_internal_value(self, data: Any) -> uuid.UUID:
        if not isinstance(data, str):
            raise serializers.ValidationError(MSG_STRING)
        if not UUID_TEXT.match(data):
            raise serializers.ValidationError(MSG_UUID)
        return uuid.UUID(data)


class DateTimeField(_PlainGetValue, serializers.DateTimeField):
    def to_internal_value(self, value: Any) -> datetime.datetime:
        if not isinstance(value, str):
            raise serializers.ValidationError(MSG_STRING)
        return super().to_internal_value(value)


class DictField(_PlainGetValue, serializers.DictField):
    def to_internal_value(self, data: Any) -> dict[Any, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError(MSG_OBJECT)
        return super().to_internal_value(data)


class ListField(_PlainGetValue, serializers.ListField):
    def to_internal_value(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            raise serializers.ValidationError(MSG_ARRAY)
        return super().to_internal_value(data)


class JSONField(_PlainGetValue, serializers.JSONField):
    """Any JSON value (already parsed: its depth is bounded by the parser)."""


# A request object that refuses the names it does not declare, instead of DRF's silent drop (a misspelt
# `limit_usd` would otherwise make a guardrail without a budget), and says so in the schema
# (`additionalProperties: false`, ClosedSerializerSchema), so the document and the validation agree. No docstring:
# drf-spectacular would make it the description of every subclass without one.
class ClosedSerializer(serializers.Serializer[Any]):
    # The record this body makes or changes: a name the record shows but the body does not take (`id`,
    # `created_at`, a BYOK key's `provider`) is refused as read-only rather than unknown, so the caller learns
    # why a PATCH of it cannot work (it was a 200 that changed nothing).
    record: ClassVar[type[serializers.Serializer[Any]] | None] = None

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = self.fields
            unknown = [name for name in data if name not in writable or writable[name].read_only]
            if unknown:
                shown = self.record().fields if self.record is not None else {}
                raise serializers.ValidationError(
                    {str(name): MSG_READ_ONLY_FIELD if name in shown else MSG_UNKNOWN_FIELD for name in unknown[:20]}
                )
        return super().to_internal_value(data)


class ClosedSerializerSchema(OpenApiSerializerExtension):
    target_class = ClosedSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema
