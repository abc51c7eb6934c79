import json
from decimal import Decimal
from typing import Any
from uuid import UUID

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from gateway.accounts.models import Account, ApiKey
from gateway.admin_forms import usd_text
from gateway.admin_generics import ModelAdmin, ModelForm, Paginator
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.services import credits_topup

MAX_ENTRY = Decimal("1000000000")  # one top-up or refund, USD
MAX_BALANCE = Decimal("1e12")  # Account.balance is numeric(24, 12)


class CreditTopUpForm(ModelForm[LedgerEntry]):
    kind = forms.ChoiceField(choices=[(EntryKind.TOPUP, "Top-up"), (EntryKind.REFUND, "Refund")])
    amount = forms.DecimalField(
        max_digits=24,
        decimal_places=12,
        min_value=Decimal("0.000000000001"),
        max_value=MAX_ENTRY,
        help_text=f"USD, more than 0 and at most {MAX_ENTRY:,}",
    )

    class Meta:
        model = LedgerEntry
        fields = ("account", "kind", "amount", "note")

    def clean(self) -> dict[str, Any]:
        """What `credits_topup` and the balance column would refuse, refused here (a form error, not a 500)."""
        super().clean()
        cleaned = self.cleaned_data
        account, amount = cleaned.get("account"), cleaned.get("amount")
        if account is not None and amount is not None:
            balance = Account.objects.filter(pk=account.pk).values_list("balance", flat=True).first()
            if balance is not None and balance + amount >= MAX_BALANCE:
                self.add_error("amount", f"the balance would exceed {MAX_BALANCE - Decimal('1e-12'):f} USD")
        return cleaned


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ModelAdmin[LedgerEntry]):
    """The ledger is insert-only: staff add top-ups and refunds; nothing is edited or deleted."""

    list_display = ("created_at", "account", "kind", "amount_usd", "api_key", "generation_id", "is_byok")
    list_filter = ("kind", "is_byok")
    search_fields = ("account__name", "generation_id", "note")
    form = CreditTopUpForm

    def get_readonly_fields(self, request: HttpRequest, obj: LedgerEntry | None = None) -> list[str]:
        return [f.name for f in LedgerEntry._meta.fields] if obj else []

    @admin.display(description="amount", ordering="amount")
    def amount_usd(self, obj: LedgerEntry) -> str:
        return usd_text(obj.amount)

    def has_change_permission(self, request: HttpRequest, obj: LedgerEntry | None = None) -> bool:
        return obj is None

    def has_delete_permission(self, request: HttpRequest, obj: LedgerEntry | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: LedgerEntry, form: CreditTopUpForm, change: bool) -> None:
        entry = credits_topup(
            account_id=obj.account_id,
            amount=form.cleaned_data["amount"],
            note=obj.note,
            kind=form.cleaned_data["kind"],
        )
        obj.pk = entry.pk
        obj._state.adding = False


RECENT_VALUES = 5000  # a text filter offers the values of the newest rows (an index scan, not the whole log)
MAX_CHOICES = 200
LOG_COUNT_CAP = 10_000  # the request log counts at most this many rows per page view


class _RecentValueFilter(admin.SimpleListFilter):
    """Filter on a text column; any value works in the URL, the choices are those of the newest rows."""

    column = ""

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        recent = Generation.objects.order_by("-created_at").values_list(self.column, flat=True)[:RECENT_VALUES]
        values = sorted({value for value in recent if value})[:MAX_CHOICES]
        if self.value() and self.value() not in values:
            values.append(self.value())
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Generation]) -> QuerySet[Generation]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(**{self.column: value}) if _plain(value) else queryset.none()


def _plain(value: str) -> bool:
    """A value a text column can hold (PostgreSQL refuses NUL) and a filter or search should look for."""
    return len(value) <= 256 and "\x00" not in value


class ModelFilter(_RecentValueFilter):
    title = "model"
    parameter_name = "model"
    column = "model"


class ProviderFilter(_RecentValueFilter):
    title = "provider"
    parameter_name = "provider"
    column = "provider"


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [
            (IN_PROGRESS, "in progress"),
            ("completed", "completed"),
            ("incomplete", "incomplete"),
            ("failed", "failed"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Generation]) -> QuerySet[Generation]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(status=value) if _plain(value) else queryset.none()


class AccountFilter(admin.SimpleListFilter):
    """By account (the choices come from the accounts table, not from a scan of the log)."""

    title = "account"
    parameter_name = "account__id__exact"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [
            (str(pk), name) for pk, name in Account.objects.order_by("name").values_list("pk", "name")[:MAX_CHOICES]
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Generation]) -> QuerySet[Generation]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(account_id=UUID(self.value()))
        except ValueError:
            return queryset.none()


class KeyFilter(admin.SimpleListFilter):
    """By API key: the chosen account's keys (or the newest keys when no account is chosen)."""

    title = "API key"
    parameter_name = "api_key__id__exact"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        keys = ApiKey.objects.order_by("-created_at")
        account = request.GET.get(AccountFilter.parameter_name)
        if account:
            try:
                keys = keys.filter(account_id=UUID(account))
            except ValueError:
                return []
        return [
            (str(pk), f"{name} ({label})") for pk, name, label in keys.values_list("pk", "name", "label")[:MAX_CHOICES]
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Generation]) -> QuerySet[Generation]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(api_key_id=int(value)) if value.isdigit() else queryset.none()


class CappedPaginator(Paginator[Generation]):
    """Counts at most LOG_COUNT_CAP rows: a count of the whole log on every page view would be its slowest part."""

    @cached_property
    def count(self) -> int:
        return self.object_list[: LOG_COUNT_CAP + 1].count()  # type: ignore[attr-defined]  # a QuerySet


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """An HTML table (every cell escaped)."""
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows),
    )
    return format_html('<table class="gw-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, body)


def _json(value: Any) -> str:  # a JSON column's value
    if value in (None, [], {}):
        return "—"
    return format_html('<pre class="gw-json">{}</pre>', json.dumps(value, indent=2, sort_keys=True, default=str))


@admin.register(Generation)
class GenerationAdmin(ModelAdmin[Generation]):
    """The request log: one row per request, read-only. Records hold no prompt or answer text, and none is shown."""

    list_display = (
        "id",
        "created_at",
        "account",
        "key_label",
        "requested_model",
        "model",
        "provider",
        "status",
        "is_byok",
        "tokens_input",
        "tokens_output",
        "cost_usd",
        "latency_ms",
    )
    list_filter = (
        AccountFilter,
        KeyFilter,
        ModelFilter,
        ProviderFilter,
        StatusFilter,
        "is_byok",
        "streamed",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=id", "=upstream_id", "session_id")
    search_help_text = "A generation id (gen-...), the upstream's response id or a session id"
    list_select_related = ("account", "api_key")
    list_per_page = 50
    show_full_result_count = False
    paginator = CappedPaginator
    ordering = ("-created_at",)
    fieldsets = (
        (None, {"fields": ("id", "created_at", "account", "api_key", "workspace_id", "session_id")}),
        (
            "Routing",
            {
                "fields": (
                    "requested_model",
                    "model",
                    "provider",
                    "endpoint_id",
                    "upstream_id",
                    "is_byok",
                    "service_tier",
                    "attempts",
                )
            },
        ),
        ("Outcome", {"fields": ("status", "finish_reason", "error_type", "streamed", "cancelled")}),
        (
            "Tokens",
            {"fields": ("tokens_input", "tokens_cached", "tokens_cache_write", "tokens_output", "tokens_reasoning")},
        ),
        ("Costs (USD)", {"fields": ("cost", "upstream_cost", "held")}),
        ("Latency (ms)", {"fields": ("latency_ms", "ttft_ms", "generation_time_ms", "moderation_latency")}),
        ("Pipeline", {"fields": ("plugins_shown", "guardrail_flags_shown", "usage_anomaly_shown")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Generation | None = None) -> list[str]:
        # Every field of every fieldset: each lists plain names (no grouped rows).
        return [name for _, options in self.fieldsets for name in options["fields"]]  # type: ignore[misc]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Generation], bool]:
        if not _plain(search_term):
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Generation | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Generation | None = None) -> bool:
        return False

    @admin.display(description="cost", ordering="cost")
    def cost_usd(self, obj: Generation) -> str:
        return usd_text(obj.cost)

    @admin.display(description="key", ordering="api_key__name")
    def key_label(self, obj: Generation) -> str:
        return obj.api_key.label if obj.api_key else "—"

    @admin.display(description="attempts (provider_responses)")
    def attempts(self, obj: Generation) -> str:
        rows = [
            [
                index + 1,
                attempt.get("provider_name", ""),
                attempt.get("model_permaslug", ""),
                attempt.get("endpoint_id", ""),
                attempt.get("status", ""),
                attempt.get("error_type") or "",
                attempt.get("latency_ms", ""),
                "yes" if attempt.get("is_byok") else "no",
            ]
            for index, attempt in enumerate(obj.provider_responses or [])
            if isinstance(attempt, dict)
        ]
        if not rows:
            return "—"
        return _table(["#", "provider", "model", "endpoint", "status", "error", "latency ms", "BYOK"], rows)

    @admin.display(description="plugins")
    def plugins_shown(self, obj: Generation) -> str:
        return _json(obj.plugins)

    @admin.display(description="guardrail flags")
    def guardrail_flags_shown(self, obj: Generation) -> str:
        return _json(obj.guardrail_flags)

    @admin.display(description="usage anomaly")
    def usage_anomaly_shown(self, obj: Generation) -> str:
        return _json(obj.usage_anomaly)
