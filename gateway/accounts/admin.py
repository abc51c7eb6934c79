from django.contrib import admin, messages

from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.accounts.services import account_create, api_key_create


class WorkspaceInline(admin.TabularInline):
    model = Workspace
    extra = 0


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("name", "plan", "balance", "created_at")
    search_fields = ("name", "id")
    readonly_fields = ("id", "balance", "created_at")
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
    list_display = ("name", "account", "is_default", "id")
    list_filter = ("is_default",)
    search_fields = ("name", "account__name", "id")


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ("user_id", "email", "account")
    search_fields = ("user_id", "email", "account__name")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "label", "kind", "account", "workspace", "disabled", "expires_at", "created_at")
    list_filter = ("kind", "disabled")
    search_fields = ("name", "label", "hash", "account__name")
    readonly_fields = ("hash", "label", "created_at", "updated_at")
    fields = ("name", "kind", "account", "workspace", "creator", "disabled", "expires_at", "limit", "limit_reset",
              "include_byok_in_limit", "hash", "label", "created_at", "updated_at")

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = api_key_create(
            account_id=obj.account_id, name=obj.name, kind=obj.kind, workspace_id=obj.workspace_id,
            creator_user_id=obj.creator.user_id if obj.creator else None, limit=obj.limit,
            limit_reset=obj.limit_reset, include_byok_in_limit=obj.include_byok_in_limit, expires_at=obj.expires_at,
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
