from django.contrib import admin

from byok import services
from byok.models import ByokKey
from byok.serializers import ByokUpdateRequestSerializer
from gateway.admin_forms import ServiceValidatedForm

EDITABLE = ("name", "disabled", "is_fallback", "sort_order", "shared_capacity", *services.FILTERS)


class ByokKeyForm(ServiceValidatedForm):
    """The changed fields go through PATCH /byok's serializer (filters of the key's own account, known models,
    non-negative order) and are saved by `byok_key_update`, which also reorders the key's section."""

    class Meta:
        model = ByokKey
        fields = EDITABLE

    def clean(self):
        cleaned = super().clean()
        self.byok_changes = {}
        if self.errors:
            return cleaned
        data = {name: cleaned.get(name) for name in self.changed_data if name in EDITABLE}
        serializer = ByokUpdateRequestSerializer(data=data, context={"account_id": self.instance.account_id})
        changes = self.run_serializer(serializer)
        if changes is not None:
            self.byok_changes = {name: changes[name] for name in data if name in changes}
        return cleaned


@admin.register(ByokKey)
class ByokKeyAdmin(admin.ModelAdmin):
    """Staff see keys masked and can edit what PATCH /byok can; the material is never shown or editable here."""

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
        "created_at",
        "updated_at",
    )
    readonly_fields = ("id", "account", "workspace", "provider", "kind", "label", "key_id", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False  # keys are added through the API, which validates the credential's shape

    def save_model(self, request, obj, form, change):
        saved = services.byok_key_update(key=obj, changes=form.byok_changes)
        obj.sort_order, obj.is_fallback, obj.updated_at = saved.sort_order, saved.is_fallback, saved.updated_at
