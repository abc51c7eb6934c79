from django.contrib import admin

from byok.models import ByokKey


@admin.register(ByokKey)
class ByokKeyAdmin(admin.ModelAdmin):
    """Staff see keys masked and can disable them; the material is never shown or editable here."""

    list_display = ("label", "provider", "account", "workspace", "name", "is_fallback", "sort_order", "disabled")
    list_filter = ("provider", "disabled", "is_fallback", "shared_capacity")
    search_fields = ("label", "name", "account__name", "provider")
    fields = ("id", "account", "workspace", "provider", "kind", "label", "key_id", "name", "disabled", "is_fallback",
              "sort_order", "shared_capacity", "allowed_models", "allowed_api_key_hashes", "allowed_user_ids",
              "created_at", "updated_at")
    readonly_fields = ("id", "account", "workspace", "provider", "kind", "label", "key_id", "created_at",
                       "updated_at")

    def has_add_permission(self, request):
        return False  # keys are added through the API, which validates the credential's shape
