"""Guardrails: an account's policies (budget, model/provider limits, data policy, content checks) and who they
apply to. A guardrail enforces nothing until a key or a member is assigned to it, or it is its workspace's
default; at most one guardrail per key, per member and (as the default) per workspace."""

import uuid

from django.db import models


class ResetInterval(models.TextChoices):
    DAILY = "daily", "Daily"
    WEEKLY = "weekly", "Weekly"
    MONTHLY = "monthly", "Monthly"


class DataCollection(models.TextChoices):
    ALLOW = "allow", "Allow"
    DENY = "deny", "Deny"


class FilterAction(models.TextChoices):
    """What a content match does; on one span `block` beats `redact` beats `flag`."""

    BLOCK = "block", "Block"
    REDACT = "redact", "Redact"
    FLAG = "flag", "Flag"


class Guardrail(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="guardrails")
    workspace = models.ForeignKey("accounts.Workspace", on_delete=models.CASCADE, related_name="guardrails")
    is_workspace_default = models.BooleanField(
        default=False, help_text="Applies to the workspace's requests whose key and member have no guardrail"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    limit_usd = models.DecimalField(
        max_digits=24, decimal_places=12, null=True, blank=True, help_text="Budget per assignee and period (USD)"
    )
    # null: a lifetime budget (the API's `reset_interval: null`)
    reset_interval = models.CharField(max_length=10, choices=ResetInterval.choices, null=True, blank=True)  # noqa: DJ001
    include_byok_in_budgets = models.BooleanField(default=False)
    allowed_models = models.JSONField(null=True, blank=True, help_text="Model ids or wildcards; null = all")
    ignored_models = models.JSONField(null=True, blank=True)
    allowed_providers = models.JSONField(null=True, blank=True, help_text="Provider slugs; null = all")
    ignored_providers = models.JSONField(null=True, blank=True)
    enforce_zdr = models.BooleanField(default=False)
    data_collection = models.CharField(max_length=5, choices=DataCollection.choices, default=DataCollection.ALLOW)
    content_filters = models.JSONField(default=list, blank=True, help_text='[{"pattern", "action", "label"?}]')
    content_filter_builtins = models.JSONField(default=list, blank=True, help_text='[{"slug", "action"}]')
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace"], condition=models.Q(is_workspace_default=True), name="one_default_guardrail"
            ),
            models.CheckConstraint(
                condition=models.Q(limit_usd__isnull=True) | models.Q(limit_usd__gte=0), name="guardrail_limit_gte_0"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class GuardrailKeyAssignment(models.Model):
    """An API key's guardrail (one per key: assigning the key elsewhere moves this row)."""

    guardrail = models.ForeignKey(Guardrail, on_delete=models.CASCADE, related_name="key_assignments")
    api_key = models.OneToOneField("accounts.ApiKey", on_delete=models.CASCADE, related_name="guardrail_assignment")
    assigned_by = models.CharField(max_length=256, blank=True, default="", help_text="User id of who assigned it")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.api_key} -> {self.guardrail}"


class GuardrailMemberAssignment(models.Model):
    """A member's guardrail (one per member), applied to requests made with the keys the member created."""

    guardrail = models.ForeignKey(Guardrail, on_delete=models.CASCADE, related_name="member_assignments")
    member = models.OneToOneField("accounts.Member", on_delete=models.CASCADE, related_name="guardrail_assignment")
    assigned_by = models.CharField(max_length=256, blank=True, default="", help_text="User id of who assigned it")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.member} -> {self.guardrail}"
