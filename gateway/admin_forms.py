"""Admin forms that validate through the services and serializers the API uses, in the form's `clean`, so the
admin can save nothing the API would refuse and a service's refusal is an error on the page, never a 500. JSON
lists are edited as checkboxes plus a text box (StringListField), never as raw JSON."""

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from django import forms
from django.forms.renderers import BaseRenderer
from django.utils.datastructures import MultiValueDict
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from rest_framework.serializers import Serializer

from gateway.admin_generics import ModelForm
from gateway.errors import GatewayError

T = TypeVar("T")
F = TypeVar("F", bound=forms.Field)


def split_list(text: str) -> list[str]:
    """Entries of a comma- or line-separated list, trimmed, empties dropped."""
    return [item.strip() for line in text.splitlines() for item in line.split(",") if item.strip()]


def parse_json_list(text: str, *, default: list[Any] | None) -> Any:
    """Text that is JSON (an array, an object or a string) as its value, whatever its shape (the service then
    refuses a shape it does not take, by name); otherwise `default`, or the text as a comma-separated list."""
    if text.strip() == "null":
        return None
    if text.lstrip()[:1] in ("[", "{", '"'):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return split_list(text) if default is None else default


class StringListWidget(forms.Widget):
    """A list of strings: a checkbox per suggested value (the ticked ones first, in the list's order, so an
    unchanged list is submitted as it was), and a text box for the list's other values, comma-separated."""

    def __init__(self, suggestions: Sequence[str] = (), attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.suggestions: Sequence[str] = suggestions

    def format_value(self, value: Any) -> list[Any]:
        if value in (None, ""):
            return []
        if isinstance(value, str):
            try:
                value = json.loads(value)  # a bound form's JSON text, as JSONField's own widget would hold it
            except ValueError:
                return [value]
        return list(value) if isinstance(value, list | tuple) else [value]

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: BaseRenderer | None = None
    ) -> SafeString:
        values = self.format_value(value)
        ticked = [item for item in values if isinstance(item, str) and item in self.suggestions]
        boxes = [*ticked, *(item for item in self.suggestions if item not in ticked)]
        others = [item for item in values if item not in ticked]
        base_id = (attrs or {}).get("id") or f"id_{name}"
        checks = format_html_join(
            "",
            '<label class="gw-list-choice"><input type="checkbox" name="{}" value="{}" id="{}_{}"{}> {}</label>',
            (
                (name, item, base_id, index, " checked" if item in ticked else "", item)
                for index, item in enumerate(boxes)
            ),
        )
        other_text = ", ".join(item if isinstance(item, str) else json.dumps(item) for item in others)
        return format_html(
            '<div class="gw-list" id="{}">{}<input type="text" class="gw-list-other vTextField" name="{}__other" '
            'id="{}_other" value="{}" placeholder="{}" aria-label="other values of {}"></div>',
            base_id,
            checks,
            name,
            base_id,
            other_text,
            "others, comma-separated" if boxes else "comma- or line-separated",
            name,
        )

    def value_from_datadict(self, data: Mapping[str, Any], files: MultiValueDict[str, Any], name: str) -> Any:
        ticked = data.getlist(name) if hasattr(data, "getlist") else list(data.get(name) or [])
        other = data.get(f"{name}__other")
        if other is None and len(ticked) == 1:
            return parse_json_list(ticked[0], default=ticked)  # posted as JSON by a script (no widget's text box)
        typed = parse_json_list(other or "", default=None)
        listed = [*ticked, *(typed if isinstance(typed, list) else [typed])]
        return listed or None  # nothing ticked or typed: the field's empty value

    def value_omitted_from_data(self, data: Mapping[str, Any], files: MultiValueDict[str, Any], name: str) -> bool:
        return False  # no box ticked and no text is an empty list, not an omitted field

    def id_for_label(self, id_: str) -> str:
        return f"{id_}_other" if id_ else id_


class StringListField(forms.Field):
    """A JSON list of strings edited as checkboxes (suggested values) plus free text; the list's entries are then
    checked by the form's service (the catalog loader's or the API serializer's rules), not here."""

    def __init__(self, *, suggestions: Sequence[str] = (), nullable: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", StringListWidget(suggestions))
        super().__init__(**kwargs)
        self.nullable = nullable  # an empty list is saved as null (e.g. a guardrail's "no restriction")

    def to_python(self, value: Any) -> Any:
        if value is None:
            return None if self.nullable else []
        if not isinstance(value, list | tuple):
            return value  # JSON of another shape (a string, an object): left for the service to refuse by name
        # An empty box posts ""; anything else, duplicates and non-strings included, is kept for the service.
        return [item.strip() if isinstance(item, str) else item for item in value if item != ""]

    def prepare_value(self, value: Any) -> Any:
        return value

    def has_changed(self, initial: Any, data: Any) -> bool:
        return initial != self.to_python(data)

    def set_suggestions(self, suggestions: Sequence[str]) -> None:
        self.widget.suggestions = list(dict.fromkeys(suggestions))


class ScoresWidget(forms.Widget):
    """A JSON object of names -> numbers as one number box per known name (`keys`), empty when unset; a stored
    name that is not known gets its own box too, so nothing stored is hidden."""

    def __init__(self, keys: Sequence[str] = (), attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.keys = keys

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: BaseRenderer | None = None
    ) -> SafeString:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = {}
        scores = value if isinstance(value, dict) else {}
        keys = [*self.keys, *(str(key) for key in scores if key not in self.keys)]
        base_id = (attrs or {}).get("id") or f"id_{name}"
        boxes = format_html_join(
            "",
            '<label class="gw-score" for="{}_{}">{} <input type="number" step="any" min="0" max="1" name="{}__{}" '
            'id="{}_{}" value="{}"></label>',
            (
                (base_id, key, key, name, key, base_id, key, "" if scores.get(key) is None else scores[key])
                for key in keys
            ),
        )
        return format_html('<div class="gw-scores" id="{}">{}</div>', base_id, boxes)

    def value_from_datadict(self, data: Mapping[str, Any], files: MultiValueDict[str, Any], name: str) -> Any:
        if name in data:  # posted as JSON by a script (no widget's boxes)
            return parse_json_list(data[name], default=data[name])
        prefix = f"{name}__"
        return {
            key[len(prefix) :]: _number(text)
            for key, text in data.items()
            if key.startswith(prefix) and str(text).strip() != ""
        }

    def value_omitted_from_data(self, data: Mapping[str, Any], files: MultiValueDict[str, Any], name: str) -> bool:
        return False  # every box empty is an empty object

    def id_for_label(self, id_: str) -> str:
        return f"{id_}_{self.keys[0]}" if id_ and self.keys else id_


def _number(text: str) -> float | str:
    """A box's number; text that is not one stays text, for the service to refuse by name."""
    try:
        return float(text)
    except ValueError:
        return text


class ScoresField(forms.Field):
    """A JSON object of names -> numbers (e.g. a model's task scores) edited as number boxes; the object is then
    checked by the form's service, not here."""

    def __init__(self, *, keys: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", ScoresWidget(keys))
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        return {} if value in (None, "") else value

    def has_changed(self, initial: Any, data: Any) -> bool:
        return (initial or {}) != self.to_python(data)


class JsonFieldsForm(ModelForm[Any]):
    """A model form whose JSON fields are edited with widgets, not as JSON text: `list_fields` (field name ->
    suggested values, or a callable giving them when the form is built, e.g. the catalog's provider slugs) as
    StringListFields (those in `nullable_lists` saved as null when empty), `score_fields` (field name -> known
    names) as ScoresFields."""

    list_fields: dict[str, Sequence[str] | Callable[[], Sequence[str]]] = {}
    nullable_lists: tuple[str, ...] = ()
    score_fields: dict[str, Sequence[str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, suggestions in self.list_fields.items():
            if name in self.fields:
                offered = suggestions() if callable(suggestions) else suggestions
                hint = "Tick the values, or type others (comma-separated)" if offered else "Comma- or line-separated"
                listed = self._replace(name, StringListField, hint, nullable=name in self.nullable_lists)
                listed.set_suggestions(offered)
        for name, keys in self.score_fields.items():
            if name in self.fields:
                self._replace(name, ScoresField, "Empty: no score", keys=keys)

    def _replace(self, name: str, kind: type[F], help_text: str, **kwargs: Any) -> F:
        field = self.fields[name]
        replacement = kind(label=field.label, help_text=field.help_text or help_text, **kwargs)
        self.fields[name] = replacement
        return replacement


class ServiceValidatedForm(JsonFieldsForm):
    """`field_aliases` maps the API's field names (in a GatewayError's metadata or a serializer's errors) to
    this form's; an error for a field the form does not show goes to the top of the form."""

    field_aliases: dict[str, str] = {}
    # An app's own "bad input" exceptions besides GatewayError (e.g. routing's CatalogError, byok's ShapeError),
    # declared by the app's admin form so this module knows no app: the error goes on the exception's `field`
    # when it names one, else on the `error_field` given to `run_service_check`.
    service_errors: tuple[type[Exception], ...] = ()

    def clean(self) -> dict[str, Any]:
        super().clean()
        return self.cleaned_data

    def run_service_check(
        self, check: Callable[..., T], *args: Any, error_field: str | None = None, **kwargs: Any
    ) -> T | None:
        """`check(...)`'s result, or None with its errors added to the form."""
        try:
            return check(*args, **kwargs)
        except GatewayError as exc:
            fields = list((exc.metadata or {}).get("fields") or {})
            self.add_field_error(fields[0] if fields else None, exc.message)
        except self.service_errors as exc:
            self.add_field_error(getattr(exc, "field", None) or error_field, str(exc))
        return None

    def run_serializer(self, serializer: Serializer[Any]) -> dict[str, Any] | None:
        """The serializer's validated data, or None with its errors added to the form."""
        if serializer.is_valid():
            return dict(serializer.validated_data)
        for name, messages in serializer.errors.items():
            field = None if name == "non_field_errors" else name
            text = "; ".join(_flatten(messages))
            self.add_field_error(field, f"{name}: {text}" if field else text)
        return None

    def add_field_error(self, name: str | None, message: str) -> None:
        if name is not None:
            name = self.field_aliases.get(name, name)
        if name is not None and name not in self.fields:
            name = None
        if name is not None and name in self.errors:
            return  # the field's own validation already explains it
        self.add_error(name, message)


def _flatten(detail: Any) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {text}" for key, value in detail.items() for text in _flatten(value)]
    if isinstance(detail, list | tuple):
        return [text for item in detail for text in _flatten(item)]
    return [str(detail)]


def usd_text(value: Decimal | str | int | None) -> str:
    """Dollars to 4 decimals; a non-zero amount under a cent to 8, trailing zeros cut (one request's charge is often
    below $0.0001, and "$0.0000" would hide it)."""
    if value is None:
        return "—"
    amount = Decimal(value)
    small = amount != 0 and abs(amount) < Decimal("0.01")
    text = f"{abs(amount):,.8f}".rstrip("0") if small else f"{abs(amount):,.4f}"
    return f"{'-' if amount < 0 else ''}${text}"
