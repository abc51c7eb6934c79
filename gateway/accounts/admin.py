from django.contrib import admin, messages

from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.accounts.services import account_create, api_key_check, api_key_create, api_key_limit_check
from gateway.admin_forms import ServiceValidatedForm


class WorkspaceInline(admin.TabularInline):
    """The default workspace comes with the account (account_create); staff add others, never a second default."""

    model = Workspace
    extra = 0
    fields = ("name", "is_default")
    readonly_fields = ("is_default",)


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("name", "plan", "balance", "reserved", "created_at")
    search_fields = ("name", "id")
    readonly_fields = ("id", "balance", "reserved", "created_at")
    inlines = [WorkspaceInline]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        created = account_create(name=obj.name, plan=obj.plan)  # also creates the default workspace
        obj.pk = created.pk
        obj._state.adding = False
        obj.created_at = created.created_at


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    """A workspace never moves to another account (its keys would follow it across tenants), and the default
    one is the account's own: both are read-only here."""

    list_display = ("name", "account", "is_default", "id")
    list_filter = ("is_default",)
    search_fields = ("name", "account__name", "id")

    def get_readonly_fields(self, request, obj=None):
        return ("account", "is_default") if obj else ("is_default",)


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ("user_id", "email", "account")
    search_fields = ("user_id", "email", "account__name")

    def get_readonly_fields(self, request, obj=None):
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

    def clean(self):
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
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ("name", "label", "kind", "account", "workspace", "disabled", "expires_at", "created_at")
    list_filter = ("kind", "disabled")
    search_fields = ("name", "label", "hash", "account__name")
    fields = (*ApiKeyForm.Meta.fields, "hash", "label", "created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        always = ("hash", "label", "created_at", "updated_at")
        # What PATCH /keys cannot change either: a key never moves to another account, workspace or kind.
        return (*always, "kind", "account", "workspace", "creator") if obj else always

    def save_model(self, request, obj, form, change):
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
