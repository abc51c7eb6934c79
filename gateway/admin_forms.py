"""Admin forms that validate through the services and serializers the API uses, in the form's `clean`, so the
admin can save nothing the API would refuse and a service's refusal is an error on the page, never a 500."""

from typing import Any

from django import forms

from gateway.errors import GatewayError


class ServiceValidatedForm(forms.ModelForm):
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

    def run_service_check(self, check, *args, error_field: str | None = None, **kwargs):
        """`check(...)`'s result, or None with its errors added to the form."""
        try:
            return check(*args, **kwargs)
        except GatewayError as exc:
            fields = list((exc.metadata or {}).get("fields") or {})
            self.add_field_error(fields[0] if fields else None, exc.message)
        except self.service_errors as exc:
            self.add_field_error(getattr(exc, "field", None) or error_field, str(exc))
        return None

    def run_serializer(self, serializer) -> dict | None:
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


def _flatten(detail) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {text}" for key, value in detail.items() for text in _flatten(value)]
    if isinstance(detail, list | tuple):
        return [text for item in detail for text in _flatten(item)]
    return [str(detail)]
