import uuid
from decimal import Decimal

from django.db import models


class Plan(models.TextChoices):
    PAY_AS_YOU_GO = "payg", "Pay-as-you-go"
    ENTERPRISE = "enterprise", "Enterprise"


class Account(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    plan = models.CharField(max_length=20, choices=Plan.choices, default=Plan.PAY_AS_YOU_GO)
    # A cache of the ledger's sum, only ever changed together with a ledger entry (billing.services).
    balance = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal("0"), editable=False)
    # The sum of the account's open credit holds (requests in flight), never in the ledger: what is left to spend
    # is balance - reserved. Changed only by billing.services, in the statement that opens or closes a hold.
    reserved = models.DecimalField(
        max_digits=24,
        decimal_places=12,
        default=Decimal("0"),
        editable=False,
        help_text="Held for requests in flight (not in the ledger); spendable credits are balance - reserved",
    )
    # Suspended: every key of the account is refused (403) within CACHE_VERSION_CHECK_SECONDS; the reason is shown.
    suspended = models.BooleanField(default=False, help_text="Every key of the account answers 403 while set")
    suspended_reason = models.CharField(
        max_length=300, blank=True, help_text="Shown to callers in the 403 message (no secrets)"
    )
    suspended_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(balance__gte=0), name="account_balance_gte_0"),
            # A hold never promises money the balance does not have, whatever the code above the database does.
            models.CheckConstraint(
                condition=models.Q(reserved__gte=0, balance__gte=models.F("reserved")),
                name="account_reserved_in_balance",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Workspace(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="workspaces")
    name = models.CharField(max_length=200)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account"], condition=models.Q(is_default=True), name="one_default_workspace"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account} / {self.name}"


class Member(models.Model):
    """A person of an account, known by the identity provider's user id."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="members")
    user_id = models.CharField(max_length=256)
    email = models.EmailField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "user_id"], name="member_user_id_per_account")]

    def __str__(self) -> str:
        return self.user_id


class KeyKind(models.TextChoices):
    INFERENCE = "inference", "Inference"
    MANAGEMENT = "management", "Management"


class LimitReset(models.TextChoices):
    DAILY = "daily", "Daily"
    WEEKLY = "weekly", "Weekly"
    MONTHLY = "monthly", "Monthly"


class ApiKey(models.Model):
    """An API key; only the SHA-256 hex digest of the secret is stored."""

    hash = models.CharField(max_length=64, unique=True, editable=False)
    label = models.CharField(max_length=40, editable=False)
    kind = models.CharField(max_length=12, choices=KeyKind.choices, default=KeyKind.INFERENCE)
    name = models.CharField(max_length=200)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="api_keys")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    creator = models.ForeignKey(Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="api_keys")
    disabled = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    limit = models.DecimalField(max_digits=24, decimal_places=12, null=True, blank=True)
    limit_reset = models.CharField(max_length=10, choices=LimitReset.choices, null=True, blank=True)  # noqa: DJ001
    include_byok_in_limit = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.label})"
