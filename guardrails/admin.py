"""Staff edit guardrails and their assignments here. The form validates through POST/PATCH /guardrails'
serializer (the same pattern check, 400 there, a form error here) and saves through the services; inline
assignments move a key or member that had another guardrail, as the API does. "Test this text" shows what
the guardrail's filters would block, redact or flag in a text."""

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypedDict, TypeVar
from uuid import UUID

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from gateway.admin_forms import ServiceValidatedForm
from gateway.admin_generics import BaseInlineFormSet, ModelAdmin, ModelForm, TabularInline
from guardrails import selectors, services
from guardrails.models import Guardrail, GuardrailKeyAssignment, GuardrailMemberAssignment
from guardrails.policy import policy_for
from guardrails.serializers import MAX_LIMIT_USD, GuardrailUpdateRequestSerializer
from routing.models import Provider

M = TypeVar("M", GuardrailKeyAssignment, GuardrailMemberAssignment)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _AssignmentCounts(TypedDict):
        key_count: int
        member_count: int

    CountedGuardrail: TypeAlias = WithAnnotations[Guardrail, _AssignmentCounts]  # GuardrailAdmin.get_queryset's rows
VALIDATED = tuple(name for name in services.EDITABLE if name not in ("name", "limit_usd"))
MAX_TEST_TEXT_CHARS = 100_000


class GuardrailForm(ServiceValidatedForm):
    """Every changed field goes through PATCH /guardrails' serializer (a new guardrail: every field), so the
    admin saves nothing the API would refuse; `guardrail_fields` is what the service then writes."""

    # Lists as checkboxes (providers) or text (model ids and wildcards); nothing ticked or typed is null, no limit.
    list_fields = {
        "allowed_providers": lambda: list(Provider.objects.order_by("slug").values_list("slug", flat=True)),
        "ignored_providers": lambda: list(Provider.objects.order_by("slug").values_list("slug", flat=True)),
        "allowed_models": (),
        "ignored_models": (),
    }
    nullable_lists = ("allowed_providers", "ignored_providers", "allowed_models", "ignored_models")

    class Meta:
        model = Guardrail
        fields = ("account", "workspace", *services.EDITABLE)

    def add_field_error(self, name: str | None, message: str) -> None:
        """`content_filters[1].pattern` (the API's name for the filter) is an error on `content_filters` here."""
        super().add_field_error(re.split(r"[\[.]", name, maxsplit=1)[0] if name else None, message)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.guardrail_fields: dict[str, Any] = {}
        if self.errors:
            return cleaned
        adding = self.instance._state.adding
        if adding and cleaned["workspace"].account_id != cleaned["account"].pk:
            self.add_error("workspace", "This workspace belongs to another account.")
        limit = cleaned.get("limit_usd")
        if limit is not None and not 0 <= limit <= MAX_LIMIT_USD:
            self.add_error("limit_usd", f"Must be between 0 and {MAX_LIMIT_USD}.")
        names = [n for n in VALIDATED if adding or n in self.changed_data]
        serializer = GuardrailUpdateRequestSerializer(data={name: cleaned.get(name) for name in names})
        checked = self.run_service_check(self.run_serializer, serializer, error_field="content_filters")
        if checked is not None and not self.errors:
            self.guardrail_fields = {
                **checked,
                **{n: cleaned.get(n) for n in ("name", "limit_usd") if adding or n in self.changed_data},
            }
        # The service moves the workspace default; the form's own instance must not trip the one-default
        # constraint (checked after `clean`) before it has.
        cleaned.pop("is_workspace_default", None)
        return cleaned


class AssignmentFormSet(BaseInlineFormSet[M, Guardrail, ModelForm[M]], Generic[M]):
    """Only the guardrail's own account's keys or members; one of them assigned elsewhere moves here."""

    model: type[M]  # always set by the inline's formset factory
    target = ""  # "api_key" or "member"

    def clean(self) -> None:
        super().clean()
        for form in self.forms:
            chosen = form.cleaned_data.get(self.target) if form.cleaned_data else None
            if chosen is not None and chosen.account_id != self.instance.account_id:
                form.add_error(self.target, "This belongs to another account.")
            if chosen is not None and getattr(chosen, "disabled", False) and form.has_changed():
                form.add_error(self.target, "This key is disabled.")
            if chosen is not None and form.has_changed() and not self._assignable(chosen):
                form.add_error(self.target, self.refusal)

    refusal = ""

    def _assignable(self, chosen: Any) -> bool:  # an ApiKey or a Member, as `target` says
        return True


class KeyAssignmentFormSet(AssignmentFormSet[GuardrailKeyAssignment]):
    target = "api_key"
    refusal = "This key is of another workspace, and this guardrail is not account-level (of the default workspace)."

    def _assignable(self, chosen: Any) -> bool:
        return not services.guardrail_keys_outside(guardrail=self.instance, keys=[chosen])


class MemberAssignmentFormSet(AssignmentFormSet[GuardrailMemberAssignment]):
    target = "member"
    refusal = "A member's guardrail must be account-level (of the account's default workspace)."

    def _assignable(self, chosen: Any) -> bool:
        return services.guardrail_is_account_level(guardrail=self.instance)


class AssignmentForm(ModelForm[Any]):
    def validate_unique(self) -> None:
        """Skipped on purpose: a key or member that has another guardrail is moved here when saved."""


class KeyAssignmentInline(TabularInline[GuardrailKeyAssignment, Guardrail]):
    model = GuardrailKeyAssignment
    form = AssignmentForm
    formset = KeyAssignmentFormSet
    fields = ("api_key", "assigned_by", "created_at")
    readonly_fields = ("assigned_by", "created_at")
    raw_id_fields = ("api_key",)
    extra = 0


class MemberAssignmentInline(TabularInline[GuardrailMemberAssignment, Guardrail]):
    model = GuardrailMemberAssignment
    form = AssignmentForm
    formset = MemberAssignmentFormSet
    fields = ("member", "assigned_by", "created_at")
    readonly_fields = ("assigned_by", "created_at")
    raw_id_fields = ("member",)
    extra = 0


class TestTextForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 100}), max_length=MAX_TEST_TEXT_CHARS)


@admin.register(Guardrail)
class GuardrailAdmin(ModelAdmin[Guardrail]):
    form = GuardrailForm
    inlines = [KeyAssignmentInline, MemberAssignmentInline]
    list_display = ("name", "account", "workspace", "scope", "budget", "spend", "resets_at")
    list_filter = ("is_workspace_default", "reset_interval", "enforce_zdr", "data_collection")
    search_fields = ("name", "description", "account__name")
    readonly_fields = ("id", "test_text_link", "created_at", "updated_at")
    fields = ("id", "account", "workspace", *services.EDITABLE, "test_text_link", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Guardrail | None = None) -> tuple[str, ...]:
        # A guardrail never moves to another account or workspace (the API cannot move one either).
        return (*self.readonly_fields, "account", "workspace") if obj else self.readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Guardrail]:
        return (
            super()
            .get_queryset(request)
            .select_related("account", "workspace")
            .annotate(key_count=Count("key_assignments", distinct=True))
            .annotate(member_count=Count("member_assignments", distinct=True))
        )

    @admin.display(description="Scope")
    def scope(self, obj: "CountedGuardrail") -> str:
        parts = ["workspace default"] if obj.is_workspace_default else []
        parts += [f"{obj.key_count} key(s)"] if obj.key_count else []
        parts += [f"{obj.member_count} member(s)"] if obj.member_count else []
        return ", ".join(parts) or "unassigned"

    @admin.display(description="Budget")
    def budget(self, obj: Guardrail) -> str:
        if obj.limit_usd is None:
            return "-"
        return f"${obj.limit_usd.normalize():f} {obj.reset_interval or 'lifetime'}"

    @admin.display(description="Spend this period")
    def spend(self, obj: Guardrail) -> str:
        return f"${selectors.guardrail_usage(guardrail=obj).usage.normalize():f}"

    @admin.display(description="Resets at")
    def resets_at(self, obj: Guardrail) -> datetime | str:
        return selectors.period_bounds(obj.reset_interval)[1] or "never (lifetime)"

    @admin.display(description="Test this text")
    def test_text_link(self, obj: Guardrail) -> str:
        if obj is None or obj.pk is None:
            return "Save the guardrail first."
        url = reverse("admin:guardrails_guardrail_test_text", args=[obj.pk])
        return format_html('<a href="{}">Test a text against these filters</a>', url)

    def save_model(self, request: HttpRequest, obj: Guardrail, form: GuardrailForm, change: bool) -> None:
        if change:
            saved = services.guardrail_update(guardrail=obj, changes=form.guardrail_fields)
        else:
            saved = services.guardrail_create(
                account_id=obj.account_id, workspace_id=obj.workspace_id, fields=form.guardrail_fields
            )
        obj.pk, obj.created_at, obj.updated_at = saved.pk, saved.created_at, saved.updated_at
        obj._state.adding = False

    def save_formset(
        self, request: HttpRequest, form: GuardrailForm, formset: AssignmentFormSet[Any], change: bool
    ) -> None:
        """Assignments are written by the services, which move a key or member from its old guardrail."""
        target = formset.target
        guardrail, by = form.instance, f"admin:{request.user.get_username()}"
        removed = [f.instance.pk for f in formset.deleted_forms if f.instance.pk]
        changed = [f for f in formset.forms if f not in formset.deleted_forms and f.has_changed()]
        removed += [f.instance.pk for f in changed if f.instance.pk]  # an existing row pointed elsewhere
        old_rows = list(formset.model.objects.filter(pk__in=removed).select_related(target))
        old = [getattr(row, target) for row in old_rows]
        chosen = [f.cleaned_data[target] for f in changed]
        if target == "api_key":
            services.guardrail_keys_unassign(guardrail=guardrail, keys=old)
            services.guardrail_keys_assign(guardrail=guardrail, keys=chosen, assigned_by=by)
        else:
            services.guardrail_members_unassign(guardrail=guardrail, members=old)
            services.guardrail_members_assign(guardrail=guardrail, members=chosen, assigned_by=by)
        # What formset.save() would have recorded, for the admin's change message.
        formset.new_objects = list(formset.model.objects.filter(guardrail=guardrail, **{f"{target}__in": chosen}))
        formset.changed_objects, formset.deleted_objects = [], old_rows

    def get_urls(self) -> list[URLPattern]:
        test = path(
            "<uuid:guardrail_id>/test-text/",
            self.admin_site.admin_view(self.test_text_view),
            name="guardrails_guardrail_test_text",
        )
        return [test, *super().get_urls()]

    def test_text_view(self, request: HttpRequest, guardrail_id: UUID) -> TemplateResponse:
        """What the guardrail's own filters would do with a text (the entity builtins need the entity model,
        which only the request pipeline asks: they are listed as not checked here)."""
        guardrail = get_object_or_404(Guardrail, pk=guardrail_id)
        if not self.has_view_or_change_permission(request, guardrail):
            raise PermissionDenied
        form = TestTextForm(request.POST or None)
        scan = None
        policy = policy_for(guardrail.content_filters, guardrail.content_filter_builtins)
        if request.method == "POST" and form.is_valid():
            scan = policy.scan(form.cleaned_data["text"])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": guardrail,
            "title": f"Test a text against {guardrail.name}",
            "form": form,
            "scan": scan,
            "not_checked": policy.entity_slugs,
            "blocked": scan is not None and scan.action == "block",
        }
        return TemplateResponse(request, "admin/guardrails/guardrail/test_text.html", context)
