from django import forms
from django.contrib import admin

from routing.models import AccountRoutingSettings, Endpoint, Model, Provider
from routing.services import provider_credential_set


class ProviderForm(forms.ModelForm):
    new_credential = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Set or replace the operator's API key (stored encrypted; never shown again).",
    )
    clear_credential = forms.BooleanField(required=False, help_text="Remove the stored key")

    class Meta:
        model = Provider
        fields = ("slug", "name", "adapter", "credential_kind", "base_url", "api_key_env", "zdr", "retains_prompts",
                  "trains_on_prompts", "region", "status", "is_local_standin", "allow_private_network", "docs_url")


class EndpointInline(admin.TabularInline):
    model = Endpoint
    extra = 0
    fields = ("model", "upstream_model", "price_prompt", "price_completion", "price_cached_input", "context_length",
              "max_completion_tokens", "enabled")


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ("slug", "name", "adapter", "base_url", "status", "zdr", "is_local_standin", "credential_label")
    list_filter = ("adapter", "status", "zdr", "is_local_standin")
    search_fields = ("slug", "name")
    readonly_fields = ("credential_label", "credential_key_id", "updated_at")
    inlines = [EndpointInline]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if form.cleaned_data.get("new_credential"):
            provider_credential_set(provider=obj, plaintext=form.cleaned_data["new_credential"])
        elif form.cleaned_data.get("clear_credential"):
            provider_credential_set(provider=obj, plaintext=None)


class ModelEndpointInline(admin.TabularInline):
    model = Endpoint
    extra = 1
    fields = ("provider", "upstream_model", "price_prompt", "price_completion", "price_cached_input",
              "price_request", "context_length", "max_completion_tokens", "quantization", "enabled")


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "context_length", "created")
    search_fields = ("id", "name")
    inlines = [ModelEndpointInline]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ("model", "provider", "upstream_model", "price_prompt", "price_completion", "enabled")
    list_filter = ("enabled", "provider")
    search_fields = ("model__id", "provider__slug", "upstream_model")


@admin.register(AccountRoutingSettings)
class AccountRoutingSettingsAdmin(admin.ModelAdmin):
    list_display = ("account", "enforce_zdr", "data_collection", "allowed_providers", "ignored_providers")
    list_filter = ("enforce_zdr", "data_collection")
    search_fields = ("account__name",)
