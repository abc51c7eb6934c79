from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import InlineModelAdmin
from django.db.models import DecimalField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.accounts.services import account_create, api_key_check, api_key_create, api_key_limit_check
from gateway.accounts.usage import key_usage_readers
from gateway.admin_forms import ServiceValidatedForm, usd_text
from gateway.admin_generics import ModelAdmin, TabularInline


class WorkspaceInline(TabularInline[Workspace, Account]):
    """The default workspace comes with the account (account_create); staff add others, never a second default."""

    model = Workspace
    extra = 0
    fields = ("name", "is_default")
    readonly_fields = ("is_default",)


RECENT_ROWS = 20
WINDOWS = (("all time", ""), ("today (UTC)", "_daily"), ("this week", "_weekly"), ("this month", "_monthly"))
# Spend as the ledger records it (charges are negative entries): a correlated subquery per key shown (an index
# lookup on the ledger's (api_key, kind, created_at)), not a GROUP BY over the whole ledger. Billing sits above
# accounts, so its model is reached through the reverse relation rather than imported.
_MONEY = DecimalField(max_digits=24, decimal_places=12)


def _spend(*, byok: bool | None = None) -> Coalesce:
    ledger = ApiKey._meta.get_field("ledgerentry").related_model
    charges = ledger._default_manager.filter(api_key=OuterRef("pk"), kind="charge")
    if byok is not None:
        charges = charges.filter(is_byok=byok)
    total = charges.order_by().values("api_key").annotate(total=Sum("amount")).values("total")
    return Coalesce(-Subquery(total, output_field=_MONEY), Value(Decimal(0)), output_field=_MONEY)


def _limit_text(key: ApiKey) -> str:
    if key.limit is None:
        return "no limit"
    remaining = max(key.limit - key_usage_readers().usage_in_window(key), Decimal(0))
    reset = key.limit_reset or "lifetime"
    return f"{usd_text(remaining)} left of {usd_text(key.limit)} ({reset})"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> SafeString:
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((c,) for c in row)),) for row in rows)
    )
    return format_html('<table class="gw-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, body)


class ApiKeyInline(TabularInline[ApiKey, Account]):
    """The account's keys with their spend and limit; keys are created and edited on their own page (a new key's
    plaintext is shown once there)."""

    model = ApiKey
    extra = 0
    fields = ("key_link", "kind", "workspace", "disabled", "usage_shown", "limit_shown", "expires_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Account | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiKey]:
        return super().get_queryset(request).select_related("workspace").annotate(spent=_spend(byok=False))

    @admin.display(description="key")
    def key_link(self, obj: ApiKey) -> str:
        return f"{obj.name} ({obj.label})"

    @admin.display(description="usage (all time, USD)")
    def usage_shown(self, obj: ApiKey) -> str:
        return usd_text(getattr(obj, "spent", None))

    @admin.display(description="limit")
    def limit_shown(self, obj: ApiKey) -> str:
        return _limit_text(obj)


class MemberInline(TabularInline[Member, Account]):
    model = Member
    extra = 0
    fields = ("user_id", "email", "created_at")
    readonly_fields = ("created_at",)


@admin.action(description="Suspend the selected accounts (every key answers 403)")
def suspend_accounts(modeladmin: ModelAdmin[Account], request: HttpRequest, queryset: QuerySet[Account]) -> None:
    count = 0
    for account in queryset.filter(suspended=False):
        account.suspended, account.suspended_at = True, timezone.now()
        # A save with these fields bumps the keys' version (authentication), so every process refuses the keys.
        account.save(update_fields=["suspended", "suspended_at"])
        count += 1
    modeladmin.message_user(request, f"{count} account(s) suspended: their keys are refused within seconds.")


@admin.action(description="Lift the suspension of the selected accounts")
def unsuspend_accounts(modeladmin: ModelAdmin[Account], request: HttpRequest, queryset: QuerySet[Account]) -> None:
    count = 0
    for account in queryset.filter(suspended=True):
        account.suspended, account.suspended_at = False, None
        account.save(update_fields=["suspended", "suspended_at"])
        count += 1
    modeladmin.message_user(request, f"{count} account(s) reinstated.")


class SuspendedFilter(admin.SimpleListFilter):
    title = "suspended"
    parameter_name = "suspended"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("yes", "Suspended"), ("no", "Active")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("yes", "no"):
            return queryset.filter(suspended=self.value() == "yes")
        return queryset


@admin.register(Account)
class AccountAdmin(ModelAdmin[Account]):
    list_display = ("name", "plan", "balance", "reserved", "available", "suspended", "created_at")
    list_filter = ("plan", SuspendedFilter)
    search_fields = ("name", "id")
    readonly_fields = (
        "id",
        "balance",
        "reserved",
        "available",
        "suspended_at",
        "created_at",
        "routing_settings_link",
        "recent_ledger",
        "recent_generations",
    )
    fieldsets = (
        (None, {"fields": ("id", "name", "plan", "created_at")}),
        ("Credits (USD)", {"fields": ("balance", "reserved", "available")}),
        (
            "Suspension",
            {
                "fields": ("suspended", "suspended_reason", "suspended_at"),
                "description": "A suspended account's keys all answer 403 with the reason, in every process "
                "within CACHE_VERSION_CHECK_SECONDS.",
            },
        ),
        ("Routing", {"fields": ("routing_settings_link",)}),
        ("Recent activity", {"fields": ("recent_ledger", "recent_generations")}),
    )
    inlines = [WorkspaceInline, ApiKeyInline, MemberInline]
    actions = [suspend_accounts, unsuspend_accounts]

    def get_fieldsets(self, request: HttpRequest, obj: Account | None = None) -> Any:
        if obj is None:  # a new account: the editable columns only
            return ((None, {"fields": ("name", "plan")}),)
        return self.fieldsets

    def get_inlines(self, request: HttpRequest, obj: Account | None) -> "list[type[InlineModelAdmin[Any, Any]]]":
        return self.inlines if obj is not None else [WorkspaceInline]

    @admin.display(description="available")
    def available(self, obj: Account) -> Decimal:
        return obj.balance - obj.reserved

    @admin.display(description="routing settings")
    def routing_settings_link(self, obj: Account) -> SafeString:
        url = reverse("admin:routing_accountroutingsettings_changelist")
        return format_html('<a href="{}?account__id__exact={}">Routing settings of this account</a>', url, obj.pk)

    @admin.display(description="ledger")
    def recent_ledger(self, obj: Account) -> SafeString:
        entries = obj.ledger.select_related("api_key").order_by("-created_at")[:RECENT_ROWS]
        rows = [
            [
                e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                e.kind,
                usd_text(e.amount),
                e.api_key or "",
                e.generation_id,
                e.note,
            ]
            for e in entries
        ]
        url = reverse("admin:billing_ledgerentry_changelist")
        link = format_html('<p><a href="{}?account__id__exact={}">All ledger entries</a></p>', url, obj.pk)
        return format_html("{}{}", _table(["time", "kind", "amount", "key", "generation"], rows), link)

    @admin.display(description="requests")
    def recent_generations(self, obj: Account) -> SafeString:
        generations = obj.generations.order_by("-created_at")[:RECENT_ROWS]
        rows = [
            [
                format_html('<a href="{}">{}</a>', reverse("admin:billing_generation_change", args=[g.pk]), g.pk),
                g.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                g.model or g.requested_model,
                g.provider,
                g.status,
                g.tokens_input + g.tokens_output,
                usd_text(g.cost),
                g.latency_ms if g.latency_ms is not None else "",
            ]
            for g in generations
        ]
        url = reverse("admin:billing_generation_changelist")
        link = format_html('<p><a href="{}?account__id__exact={}">The account\'s request log</a></p>', url, obj.pk)
        headers = ["generation", "time", "model", "provider", "status", "tokens", "cost", "latency ms"]
        return format_html("{}{}", _table(headers, rows), link)

    def save_model(self, request: HttpRequest, obj: Account, form: Any, change: bool) -> None:
        if change:
            if "suspended" in form.changed_data:
                obj.suspended_at = timezone.now() if obj.suspended else None
            super().save_model(request, obj, form, change)
            return
        created = account_create(name=obj.name, plan=obj.plan)  # also creates the default workspace
        obj.pk = created.pk
        obj._state.adding = False
        obj.created_at = created.created_at


@admin.register(Workspace)
class WorkspaceAdmin(ModelAdmin[Workspace]):
    """A workspace never moves to another account (its keys would follow it across tenants), and the default
    one is the account's own: both are read-only here."""

    list_display = ("name", "account", "is_default", "id")
    list_filter = ("is_default",)
    search_fields = ("name", "account__name", "id")

    def get_readonly_fields(self, request: HttpRequest, obj: Workspace | None = None) -> tuple[str, ...]:
        return ("account", "is_default") if obj else ("is_default",)


@admin.register(Member)
class MemberAdmin(ModelAdmin[Member]):
    list_display = ("user_id", "email", "account")
    search_fields = ("user_id", "email", "account__name")

    def get_readonly_fields(self, request: HttpRequest, obj: Member | None = None) -> tuple[str, ...]:
        return ("account",) if obj else ()


class ApiKeyForm(ServiceValidatedForm):
    """A new key is checked by `api_key_check`, as POST /keys is; a change by the limit rules of PATCH /keys."""

    field_aliases = {"workspace_id": "workspace", "creator_user_id": "creator"}

    class Meta:
        model = ApiKey
        fields = (
            "name",
            "kind",
            "account",
            "workspace",
            "creator",
            "disabled",
            "expires_at",
            "limit",
            "limit_reset",
            "include_byok_in_limit",
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if self.instance._state.adding:
            creator = cleaned.get("creator")
            self.run_service_check(
                api_key_check,
                account_id=cleaned["account"].pk,
                kind=cleaned.get("kind"),
                workspace_id=cleaned["workspace"].pk,
                creator_user_id=creator.user_id if creator else None,
                limit=cleaned.get("limit"),
                limit_reset=cleaned.get("limit_reset"),
                expires_at=cleaned.get("expires_at"),
            )
        else:
            self.run_service_check(
                api_key_limit_check, limit=cleaned.get("limit"), limit_reset=cleaned.get("limit_reset")
            )
        return cleaned


@admin.register(ApiKey)
class ApiKeyAdmin(ModelAdmin[ApiKey]):
    form = ApiKeyForm
    list_display = (
        "name",
        "label",
        "kind",
        "account",
        "workspace",
        "disabled",
        "usage_shown",
        "byok_usage_shown",
        "limit_shown",
        "expires_at",
        "created_at",
    )
    list_filter = ("kind", "disabled")
    list_select_related = ("account", "workspace")
    search_fields = ("name", "label", "hash", "account__name")
    fields = (*ApiKeyForm.Meta.fields, "hash", "label", "usage_detail", "created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiKey]:
        return super().get_queryset(request).annotate(spent=_spend(byok=False), spent_byok=_spend(byok=True))

    @admin.display(description="usage (USD)", ordering="spent")
    def usage_shown(self, obj: ApiKey) -> str:
        return usd_text(getattr(obj, "spent", None))

    @admin.display(description="BYOK usage (USD)", ordering="spent_byok")
    def byok_usage_shown(self, obj: ApiKey) -> str:
        return usd_text(getattr(obj, "spent_byok", None))

    @admin.display(description="limit", ordering="limit")
    def limit_shown(self, obj: ApiKey) -> str:
        return _limit_text(obj)

    @admin.display(description="usage")
    def usage_detail(self, obj: ApiKey | None) -> str:
        if obj is None or obj.pk is None:
            return "—"
        usage = key_usage_readers().usage(obj.pk)
        rows = [
            [window, usd_text(getattr(usage, f"usage{suffix}")), usd_text(getattr(usage, f"byok_usage{suffix}"))]
            for window, suffix in (
                ("all time", ""),
                ("today (UTC)", "_daily"),
                ("this week", "_weekly"),
                ("this month", "_monthly"),
            )
        ]
        return format_html("{}<p>Limit: {}</p>", _table(["window", "usage", "BYOK usage"], rows), _limit_text(obj))

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        always = ("hash", "label", "usage_detail", "created_at", "updated_at")
        # What PATCH /keys cannot change either: a key never moves to another account, workspace or kind.
        return (*always, "kind", "account", "workspace", "creator") if obj else always

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = api_key_create(
            account_id=obj.account_id,
            name=obj.name,
            kind=obj.kind,
            workspace_id=obj.workspace_id,
            creator_user_id=obj.creator.user_id if obj.creator else None,
            limit=obj.limit,
            limit_reset=obj.limit_reset,
            include_byok_in_limit=obj.include_byok_in_limit,
            expires_at=obj.expires_at,
        )
        if obj.disabled:
            issued.key.disabled = True
            issued.key.save(update_fields=["disabled"])
        obj.pk, obj.hash, obj.label = issued.key.pk, issued.key.hash, issued.key.label
        obj._state.adding = False
        self.message_user(
            request,
            f"The new key is {issued.plaintext} — copy it now; it is stored only as a hash "
            "and will not be shown again.",
            messages.WARNING,
        )
