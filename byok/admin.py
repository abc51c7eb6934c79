import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from byok import services
from byok.catalog import catalog_lookups
from byok.models import ByokKey
from byok.serializers import ByokCreateRequestSerializer, ByokUpdateRequestSerializer
from byok.shapes import ShapeError, parse_credential
from gateway.admin_forms import ServiceValidatedForm
from gateway.admin_generics import ModelAdmin, ModelForm

EDITABLE = ("name", "disabled", "is_fallback", "sort_order", "shared_capacity", *services.FILTERS)
CREATED = ("account", "workspace", "provider", "name", "disabled", "is_fallback", "shared_capacity", *services.FILTERS)
KEY_HELP = (
    "The credential, as POST /byok takes it: the key itself, or for Azure, Bedrock and Vertex its JSON. It is "
    "shape-checked, stored encrypted and never shown again (only a masked label)."
)


def _credential_field(*, required: bool, help_text: str) -> forms.CharField:
    # strip=False: the shape check sees exactly what was pasted (surrounding whitespace is refused by name).
    return forms.CharField(
        required=required,
        strip=False,
        help_text=help_text,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
    )


class FilterListField(forms.CharField):
    """A filter as a list, one entry per line (a JSON array or null also works); empty: no restriction."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "One per line; empty: no restriction")
        super().__init__(strip=False, **kwargs)

    def to_python(self, value: str | None) -> Any:  # lines, or the JSON pasted (the serializer checks it)
        text = (value or "").strip()
        if not text or text == "null":
            return None
        if text[0] in '["{':
            try:
                return json.loads(text)
            except ValueError:
                raise forms.ValidationError("Enter a valid JSON array, or one entry per line.") from None
        return [line.strip() for line in text.splitlines() if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(item, str) and "\n" not in item for item in value):
            return "\n".join(value)
        return "" if value is None else value

    def validate(self, value: Any) -> None:  # the serializer checks the entries (the API's rules)
        pass


MODELS_HELP = "Model ids (author/slug), one per line; empty: all models"
HASHES_HELP = "SHA-256 hashes of this account's API keys, one per line; empty: all keys"
USERS_HELP = "Member user ids of this account, one per line; empty: all members"


class ByokKeyAddForm(ServiceValidatedForm):
    """A new key through POST /byok's rules: the serializer (filters of the account, known models), the
    provider's credential shape (byok.shapes), a workspace of the same account; saved by `byok_key_create`."""

    key = _credential_field(required=True, help_text=KEY_HELP)
    allowed_models = FilterListField(help_text=MODELS_HELP)
    allowed_api_key_hashes = FilterListField(help_text=HASHES_HELP)
    allowed_user_ids = FilterListField(help_text=USERS_HELP)
    field_aliases = {"workspace_id": "workspace"}
    service_errors = (ShapeError,)

    class Meta:
        model = ByokKey
        fields = CREATED

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.byok_create = None
        if self.errors:
            return cleaned
        account, workspace = cleaned["account"], cleaned["workspace"]
        if workspace.account_id != account.pk:
            self.add_error("workspace", "workspace: not a workspace of this account")
            return cleaned
        data = {name: cleaned.get(name) for name in CREATED if name not in ("account", "workspace")}
        data.update(key=cleaned["key"], workspace_id=str(workspace.pk))
        validated = self.run_serializer(ByokCreateRequestSerializer(data=data, context={"account_id": account.pk}))
        if validated is None:
            return cleaned
        kind = catalog_lookups().provider_credential_kind(validated["provider"])
        if kind is None:
            self.add_error("provider", f"provider: unknown provider {validated['provider']!r}")
            return cleaned
        credential = self.run_service_check(parse_credential, kind=kind, value=validated["key"], error_field="key")
        if credential is not None:
            self.byok_create = {"validated": validated, "kind": kind, "credential": credential}
        return cleaned


class ByokKeyForm(ServiceValidatedForm):
    """The changed fields go through PATCH /byok's serializer (filters of the key's own account, known models,
    non-negative order) and are saved by `byok_key_update`, which also reorders the key's section."""

    new_key = _credential_field(
        required=False,
        help_text="Rotate: new material for this key (same id, filters and position), shape-checked as PATCH "
        "/byok does. Leave empty to keep the current material.",
    )
    allowed_models = FilterListField(help_text=MODELS_HELP)
    allowed_api_key_hashes = FilterListField(help_text=HASHES_HELP)
    allowed_user_ids = FilterListField(help_text=USERS_HELP)
    service_errors = (ShapeError,)

    class Meta:
        model = ByokKey
        fields = EDITABLE

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.byok_changes, self.byok_credential = {}, None
        if self.errors:
            return cleaned
        data = {name: cleaned.get(name) for name in self.changed_data if name in EDITABLE}
        if cleaned.get("new_key"):
            data["key"] = cleaned["new_key"]
        serializer = ByokUpdateRequestSerializer(data=data, context={"account_id": self.instance.account_id})
        changes = self.run_serializer(serializer)
        if changes is None:
            return cleaned
        if "key" in changes:
            self.byok_credential = self.run_service_check(
                parse_credential, kind=self.instance.kind, value=changes.pop("key"), error_field="new_key"
            )
        self.byok_changes = {name: changes[name] for name in data if name in changes}
        return cleaned


@admin.register(ByokKey)
class ByokKeyAdmin(ModelAdmin[ByokKey]):
    """Staff see keys masked, add keys as POST /byok does and edit what PATCH /byok can (rotation included); the
    material is never shown."""

    form = ByokKeyForm
    list_display = ("label", "provider", "account", "workspace", "name", "is_fallback", "sort_order", "disabled")
    list_filter = ("provider", "disabled", "is_fallback", "shared_capacity")
    search_fields = ("label", "name", "account__name", "provider")
    fields = (
        "id",
        "account",
        "workspace",
        "provider",
        "kind",
        "label",
        "key_id",
        "name",
        "disabled",
        "is_fallback",
        "sort_order",
        "shared_capacity",
        "allowed_models",
        "allowed_api_key_hashes",
        "allowed_user_ids",
        "new_key",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("id", "account", "workspace", "provider", "kind", "label", "key_id", "created_at", "updated_at")

    raw_id_fields = ("account", "workspace")  # ids with a lookup, not a list of every account on the page

    def get_form(
        self, request: HttpRequest, obj: ByokKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm[ByokKey]]:
        if obj is None:
            kwargs["form"] = ByokKeyAddForm
            kwargs["fields"] = (*CREATED, "key")
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ByokKey | None = None) -> tuple[str, ...]:
        return (*CREATED, "key") if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: ByokKey | None = None) -> tuple[str, ...]:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ByokKey, form: Any, change: bool) -> None:
        if not change:
            plan = form.byok_create
            validated = plan["validated"]
            created = services.byok_key_create(
                account_id=obj.account_id,
                workspace_id=obj.workspace_id,
                provider=validated["provider"],
                kind=plan["kind"],
                credential=plan["credential"],
                name=validated["name"],
                disabled=validated["disabled"],
                is_fallback=validated["is_fallback"],
                shared_capacity=validated["shared_capacity"],
                filters={name: validated.get(name) for name in services.FILTERS},
            )
            obj.pk, obj.label, obj.sort_order, obj.kind = created.pk, created.label, created.sort_order, created.kind
            obj._state.adding = False
            return
        saved = services.byok_key_update(key=obj, changes=form.byok_changes, credential=form.byok_credential)
        obj.sort_order, obj.is_fallback, obj.updated_at = saved.sort_order, saved.is_fallback, saved.updated_at
        obj.label, obj.key_id = saved.label, saved.key_id
