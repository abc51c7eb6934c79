"""Plain-function checks for the parts of a request that repeat (input items, content parts, tools).

A DRF serializer instance per item costs tens of microseconds before it looks at anything; these
functions cost about a microsecond per field, so validating a body is linear with a small constant.
They apply the same strict JSON rules as `gateway.fields` and collect errors per field name; the
callers turn them into one ValidationError whose paths read like `input[3].content[0].text`.
"""

from collections.abc import Callable, Mapping
from typing import Any

from rest_framework import serializers

from gateway.fields import MSG_ARRAY, MSG_BOOLEAN, MSG_OBJECT, MSG_STRING
from responses_api.validation.common import MSG_UNKNOWN_FIELD

MAX_ERRORS = 20  # reported per request; a body of 10,000 bad items gets the first ones, not a 10,000-line message
MISSING = object()


class Fields:
    """Reads the fields of one JSON object, collecting an error per field instead of raising."""

    __slots__ = ("source", "errors", "out")

    def __init__(self, source: dict[str, Any]) -> None:
        self.source = source
        self.errors: dict[str, object] = {}  # a message, or a nested error detail
        self.out: dict[str, Any] = {}

    def text(
        self,
        name: str,
        *,
        required: bool = False,
        null: bool = False,
        blank: bool = False,
        max_length: int | None = None,
        default: Any = MISSING,
    ) -> Any:
        value = self.source.get(name, MISSING)
        if value is MISSING:
            return self._absent(name, required, default)
        if value is None:
            self._null(name, null)
            return None
        if not isinstance(value, str):
            self.errors[name] = MSG_STRING
        elif not value and not blank:
            self.errors[name] = "must not be empty"
        elif max_length is not None and len(value) > max_length:
            self.errors[name] = f"at most {max_length} characters"
        elif "\x00" in value:
            self.errors[name] = "must not contain NUL characters"
        else:
            self.out[name] = value
            return value
        return None

    def choice(
        self,
        name: str,
        choices: tuple[str, ...],
        *,
        required: bool = False,
        null: bool = False,
        default: Any = MISSING,
    ) -> Any:
        value = self.source.get(name, MISSING)
        if value is MISSING:
            return self._absent(name, required, default)
        if value is None:
            self._null(name, null)
            return None
        if not isinstance(value, str) or value not in choices:
            self.errors[name] = f"must be one of {list(choices)}"
            return None
        self.out[name] = value
        return value

    def boolean(self, name: str, *, null: bool = False, default: Any = MISSING) -> Any:
        value = self.source.get(name, MISSING)
        if value is MISSING:
            return self._absent(name, False, default)
        if value is None:
            self._null(name, null)
            return None
        if value is not True and value is not False:
            self.errors[name] = MSG_BOOLEAN
            return None
        self.out[name] = value
        return value

    def object(self, name: str, *, null: bool = False) -> dict[str, Any] | None:
        value = self.source.get(name, MISSING)
        if value is MISSING:
            return None
        if value is None:
            self._null(name, null)
            return None
        if not isinstance(value, dict):
            self.errors[name] = MSG_OBJECT
            return None
        self.out[name] = value
        return value

    def array(self, name: str, *, null: bool = False, max_length: int | None = None) -> list[Any] | None:
        value = self.source.get(name, MISSING)
        if value is MISSING:
            return None
        if value is None:
            self._null(name, null)
            return None
        if not isinstance(value, list):
            self.errors[name] = MSG_ARRAY
            return None
        if max_length is not None and len(value) > max_length:
            self.errors[name] = f"at most {max_length} entries"
            return None
        self.out[name] = value
        return value

    def only(self, *names: str) -> None:
        """Each key of the object besides `names` is an error: a field this gateway would otherwise drop."""
        for name in self.source:
            if name not in names:
                self.errors[name] = MSG_UNKNOWN_FIELD

    def _absent(self, name: str, required: bool, default: Any) -> Any:
        if required:
            self.errors[name] = "is required"
        elif default is not MISSING:
            self.out[name] = default
            return default
        return None

    def _null(self, name: str, null: bool) -> None:
        if null:
            self.out[name] = None
        else:
            self.errors[name] = "must not be null"


def check_count(value: list[Any], limit: int, what: str) -> None:
    """Count limits come first: a body over them is refused before any per-entry work."""
    if len(value) > limit:
        raise serializers.ValidationError(f"at most {limit} {what} (got {len(value)})")


def raise_indexed(errors: Mapping[int, object]) -> None:
    """Raise the first MAX_ERRORS per-entry errors, keyed by position (paths like `[3].role`)."""
    if errors:
        first: Any = dict(list(errors.items())[:MAX_ERRORS])  # DRF takes integer keys too (list positions)
        raise serializers.ValidationError(first)


# an object -> (its input items, its errors or None)
Convert = Callable[[dict[str, Any]], tuple[list[dict[str, Any]], object]]


def convert_each(values: list[Any], convert: Convert, *, limit: int, what: str) -> list[dict[str, Any]]:
    """Each object of `values` converted to input items (one value may become several), in order; the errors
    of all of them raised together, by index (a value that is not an object is one)."""
    check_count(values, limit, what)
    items: list[dict[str, Any]] = []
    errors: dict[int, object] = {}
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            errors[index] = "must be an object"
            continue
        converted, error = convert(value)
        if error:
            errors[index] = error
        items += converted
    raise_indexed(errors)
    return items
