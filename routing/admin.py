from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Sum
from django.http import HttpRequest
from django.utils import timezone

from byok.shapes import ShapeError, operator_credential
from gateway import admin_generics
from gateway.admin_forms import ServiceValidatedForm
from gateway.billing.models import Generation
from routing.models import TASK_TYPES, AccountRoutingSettings, Endpoint, Model, Provider, SearchEngine
from routing.providers.base import GATED_PARAMETERS
from routing.providers.hosted import CAPABILITIES
from routing.serializers import AccountRoutingSettingsSerializer
from routing.services import (
    PROVIDER_FIELDS,
    CatalogError,
    account_routing_update,
    endpoint_problems,
    model_problems,
    provider_credential_set,
    provider_problems,
)

# The values the list widgets offer as checkboxes (any other can be typed; the catalog's rules check every entry).
INPUT_MODALITIES = ("text", "image", "file", "audio", "video")
OUTPUT_MODALITIES = ("text", "image", "audio", "embeddings")
COMMON_PARAMETERS = (
    "temperature",
    "top_p",
    "max_tokens",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "structured_outputs",
    "reasoning",
    "include_reasoning",
    *sorted(GATED_PARAMETERS),
)


def catalog_values(field: str, *models: type[Model] | type[Endpoint]) -> Callable[[], list[str]]:
    """The values the catalog already uses in a list field (e.g. every supported parameter), sorted."""

    def values() -> list[str]:
        used = {item for model in models for row in model.objects.values_list(field, flat=True) for item in row or ()}
        return sorted(item for item in used if isinstance(item, str))

    return values


def provider_slugs() -> list[str]:
    return list(Provider.objects.order_by("slug").values_list("slug", flat=True))


def parameters() -> list[str]:
    return [*COMMON_PARAMETERS, *catalog_values("supported_parameters", Model, Endpoint)()]


class CatalogRowForm(ServiceValidatedForm):
    """A catalog row checked by the loader's own rules (`routing.services.*_problems`)."""

    problems: Callable[[dict[str, Any]], list[tuple[str, str]]] = staticmethod(lambda values: [])
    service_errors: tuple[type[Exception], ...] = (CatalogError,)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        values = {name: value for name, value in cleaned.items() if name not in self.errors}
        for field, message in self.problems(values):
            self.add_field_error(field, message)
        return cleaned


class ProviderForm(CatalogRowForm):
    problems = staticmethod(provider_problems)
    service_errors = (CatalogError, ShapeError)
    new_credential = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Set or replace the operator's API key (stored encrypted; never shown again).",
    )
    clear_credential = forms.BooleanField(required=False, help_text="Remove the stored key")

    class Meta:
        model = Provider
        fields = ("slug", *PROVIDER_FIELDS)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("new_credential") and cleaned.get("credential_kind"):
            # The same checks as a customer's key: printable, header-safe, sane length (never echoed back).
            self.run_service_check(
                operator_credential,
                kind=cleaned["credential_kind"],
                value=cleaned["new_credential"],
                error_field="new_credential",
            )
        return cleaned


class EndpointForm(CatalogRowForm):
    problems = staticmethod(endpoint_problems)
    list_fields = {
        "supported_parameters": parameters,
        "service_tiers": catalog_values("service_tiers", Endpoint),
        "hosted_tools": CAPABILITIES,
    }

    class Meta:
        model = Endpoint
        fields = "__all__"


class ModelForm(CatalogRowForm):
    problems = staticmethod(model_problems)
    list_fields = {
        "input_modalities": INPUT_MODALITIES,
        "output_modalities": OUTPUT_MODALITIES,
        "supported_parameters": parameters,
    }
    score_fields = {"task_scores": TASK_TYPES}

    class Meta:
        model = Model
        fields = "__all__"


class EndpointInline(admin_generics.TabularInline[Endpoint, Provider]):
    model = Endpoint
    form = EndpointForm
    extra = 0
    fields = (
        "model",
        "upstream_model",
        "price_prompt",
        "price_completion",
        "price_cached_input",
        "context_length",
        "max_completion_tokens",
        "enabled",
    )


@admin.register(Provider)
class ProviderAdmin(admin_generics.ModelAdmin[Provider]):
    form = ProviderForm
    list_display = ("slug", "name", "adapter", "base_url", "status", "zdr", "is_local_standin", "credential_label")
    list_filter = ("adapter", "status", "zdr", "is_local_standin")
    search_fields = ("slug", "name")
    readonly_fields = ("credential_label", "credential_key_id", "updated_at")
    inlines = [EndpointInline]

    def save_model(self, request: HttpRequest, obj: Provider, form: ProviderForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.cleaned_data.get("new_credential"):
            provider_credential_set(provider=obj, plaintext=form.cleaned_data["new_credential"])
        elif form.cleaned_data.get("clear_credential"):
            provider_credential_set(provider=obj, plaintext=None)


class ModelEndpointInline(admin_generics.TabularInline[Endpoint, Model]):
    model = Endpoint
    form = EndpointForm
    extra = 1
    fields = (
        "provider",
        "upstream_model",
        "price_prompt",
        "price_completion",
        "price_cached_input",
        "price_request",
        "context_length",
        "max_completion_tokens",
        "quantization",
        "enabled",
    )


@admin.register(Model)
class ModelAdmin(admin_generics.ModelAdmin[Model]):
    form = ModelForm
    list_display = ("id", "name", "kind", "context_length", "coding_score", "created")
    list_filter = ("kind",)
    search_fields = ("id", "name")
    readonly_fields = ("usage_share",)
    inlines = [ModelEndpointInline]

    @admin.display(description="Usage share (7 days)")
    def usage_share(self, obj: Model) -> str:
        """This deployment's share of successful spend per task type that went to this model over the last 7 days
        (the generation records' router.task_type): what the auto-router ranks by with AUTO_ROUTER_RANKING=usage,
        beside the benchmark task_scores above."""
        since = timezone.now() - timedelta(days=7)
        rows = (
            Generation.objects.filter(created_at__gte=since, status="completed", router__has_key="task_type")
            .values_list("router__task_type", "model")
            .annotate(total=Sum("cost"))
        )
        by_task: dict[str, dict[str, float]] = {}
        for task, model_id, total in rows:
            by_task.setdefault(str(task), {})[model_id] = float(total or 0)
        shares = [
            f"{task}: {spend.get(obj.pk, 0) / sum(spend.values()):.0%}"
            for task, spend in sorted(by_task.items())
            if sum(spend.values()) > 0 and obj.pk in spend
        ]
        return ", ".join(shares) or "no routed spend in the last 7 days"


@admin.register(Endpoint)
class EndpointAdmin(admin_generics.ModelAdmin[Endpoint]):
    form = EndpointForm
    list_display = ("model", "provider", "upstream_model", "price_prompt", "price_completion", "enabled")
    list_filter = ("enabled", "provider")
    search_fields = ("model__id", "provider__slug", "upstream_model")


class AccountRoutingSettingsForm(ServiceValidatedForm):
    """Validated by PATCH /routing/settings' serializer and saved by the same service."""

    SETTINGS = ("allowed_providers", "ignored_providers", "enforce_zdr", "data_collection")
    list_fields = {"allowed_providers": provider_slugs, "ignored_providers": provider_slugs}
    routing_changes: dict[str, Any] | None  # the validated settings, set by clean()

    class Meta:
        model = AccountRoutingSettings
        fields = ("account", "allowed_providers", "ignored_providers", "enforce_zdr", "data_collection")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.routing_changes = None
        if self.errors:
            return cleaned
        data = {name: cleaned.get(name) for name in self.SETTINGS if name in self.fields}
        for name in ("allowed_providers", "ignored_providers"):
            if name in data and data[name] is None:
                data[name] = []  # an emptied box: no restriction (the column holds a list, never null)
        self.routing_changes = self.run_serializer(AccountRoutingSettingsSerializer(data=data))
        return cleaned


@admin.register(AccountRoutingSettings)
class AccountRoutingSettingsAdmin(admin_generics.ModelAdmin[AccountRoutingSettings]):
    form = AccountRoutingSettingsForm
    list_display = ("account", "enforce_zdr", "data_collection", "allowed_providers", "ignored_providers")
    list_filter = ("enforce_zdr", "data_collection")
    search_fields = ("account__name",)

    def get_readonly_fields(self, request: HttpRequest, obj: AccountRoutingSettings | None = None) -> tuple[str, ...]:
        return ("account",) if obj else ()  # settings never move to another account

    def save_model(
        self, request: HttpRequest, obj: AccountRoutingSettings, form: AccountRoutingSettingsForm, change: bool
    ) -> None:
        assert form.routing_changes is not None  # set by clean(): the admin saves only a valid form
        saved = account_routing_update(account_id=obj.account_id, changes=form.routing_changes)
        obj.pk, obj.updated_at = saved.pk, saved.updated_at
        obj._state.adding = False


@admin.register(SearchEngine)
class SearchEngineAdmin(admin_generics.ModelAdmin[SearchEngine]):
    """The web search engines' prices (USD per search): what the web plugin and gateway:web_search charge."""

    list_display = ("engine", "price_per_search", "source", "updated_at")
    search_fields = ("engine",)
