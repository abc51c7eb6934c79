from django.db import models

from gateway.accounts.models import Account, ApiKey


class EntryKind(models.TextChoices):
    TOPUP = "topup", "Top-up"
    REFUND = "refund", "Refund"
    CHARGE = "charge", "Charge"
    # Holds lived in the ledger until migration 0004; their old entries stay (each pair sums to zero), no new ones.
    RESERVE = "reserve", "Reservation (before 0004)"
    RELEASE = "release", "Reservation released (before 0004)"


IN_PROGRESS = "in_progress"  # Generation.status while its credit hold is open


class LedgerEntry(models.Model):
    """Insert-only. The account's balance always equals the sum of its entries' amounts."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="ledger")
    kind = models.CharField(max_length=10, choices=EntryKind.choices)
    amount = models.DecimalField(max_digits=24, decimal_places=12, help_text="Signed USD; debits are negative.")
    # No index of its own: the (api_key, kind, created_at) index below starts with it (one index less per insert).
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, db_index=False)
    generation_id = models.CharField(max_length=64, blank=True)
    is_byok = models.BooleanField(default=False)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name_plural = "ledger entries"
        constraints = [
            # A request is charged once, whatever retries or races happen (its hold closes once, too).
            models.UniqueConstraint(
                fields=["generation_id"],
                condition=models.Q(kind="charge") & ~models.Q(generation_id=""),
                name="one_charge_per_generation",
            )
        ]
        indexes = [models.Index(fields=["api_key", "kind", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount}"


class Generation(models.Model):
    """One request, written when its credits are held (status `in_progress`, `held` set) and completed once at
    settlement (the same row: no second insert). Holds no prompt or completion text. The account's open holds are
    its `in_progress` rows; Account.reserved is their sum."""

    id = models.CharField(max_length=64, primary_key=True)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="generations")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    workspace_id = models.UUIDField(null=True, blank=True)
    requested_model = models.CharField(max_length=256)
    model = models.CharField(max_length=256, blank=True, help_text="The model that served the request")
    provider = models.CharField(max_length=100, blank=True)
    endpoint_id = models.BigIntegerField(null=True, blank=True)
    upstream_id = models.CharField(max_length=256, blank=True)
    status = models.CharField(max_length=20, default="completed")  # in_progress | completed | incomplete | failed
    finish_reason = models.CharField(max_length=40, blank=True)
    error_type = models.CharField(max_length=40, blank=True)
    tokens_input = models.IntegerField(default=0)
    tokens_cached = models.IntegerField(default=0)
    tokens_cache_write = models.IntegerField(default=0)
    tokens_output = models.IntegerField(default=0)
    tokens_reasoning = models.IntegerField(default=0)
    cost = models.DecimalField(max_digits=24, decimal_places=12, default=0, help_text="Charged to credits (USD)")
    upstream_cost = models.DecimalField(
        max_digits=24, decimal_places=12, default=0, help_text="List-price inference cost (USD)"
    )
    held = models.DecimalField(
        max_digits=24, decimal_places=12, default=0, help_text="Credits held while in progress (USD)"
    )
    is_byok = models.BooleanField(default=False)
    streamed = models.BooleanField(default=False)
    cancelled = models.BooleanField(default=False)
    latency_ms = models.IntegerField(null=True, blank=True)
    ttft_ms = models.IntegerField(null=True, blank=True)
    generation_time_ms = models.IntegerField(null=True, blank=True)
    session_id = models.CharField(max_length=256, blank=True)
    service_tier = models.CharField(max_length=20, blank=True)
    provider_responses = models.JSONField(default=list)
    usage_anomaly = models.JSONField(
        null=True,
        blank=True,
        help_text="The provider's usage when it was implausible (negative, or above what the request allows), "
        "and the bounds it was clamped to; null when the usage was billed as reported",
    )
    guardrail_flags = models.JSONField(
        null=True,
        blank=True,
        help_text="What the caller's guardrails flagged in the input (guardrail id, name, and the filters' labels; "
        "never the matched text); null when nothing was flagged",
    )
    moderation_latency = models.IntegerField(
        null=True, blank=True, help_text="Milliseconds the moderation plugin's engine took; null when it did not run"
    )
    plugins = models.JSONField(
        null=True,
        blank=True,
        help_text="What each plugin that ran did, by plugin id (its figures: pages parsed, messages removed, what "
        "was healed, its cost); never request or answer text; null when no plugin ran",
    )
    router = models.JSONField(
        null=True,
        blank=True,
        help_text="A router's decision (gateway/auto, gateway/pareto-code, gateway/fusion): its strategy, the task "
        "type and how it was classified, the tier, the chosen model and why; null when no router ran",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [
            # Only the open holds (a few per request in flight): the key limit's sum and the stale-hold sweep.
            models.Index(fields=["created_at"], condition=models.Q(status=IN_PROGRESS), name="generation_open_holds")
        ]

    def __str__(self) -> str:
        return self.id


class KeyUsageDay(models.Model):
    """One key's charges on one finished UTC day, summed once (billing.rollups.key_usage_roll_up): a key limit's
    check reads these for the days before the rollup mark and the ledger only after it, instead of every charge in
    the window (a busy key's month is hundreds of thousands of ledger rows)."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, db_index=False)
    day = models.DateField()
    spent = models.DecimalField(max_digits=24, decimal_places=12, default=0, help_text="USD, non-BYOK charges")
    spent_byok = models.DecimalField(max_digits=24, decimal_places=12, default=0, help_text="USD, BYOK fees")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "day"], name="one_usage_row_per_key_day")]

    def __str__(self) -> str:
        return f"key {self.api_key_id} on {self.day}"


class UsageRollupMark(models.Model):
    """The one row saying up to where KeyUsageDay holds the ledger's charges: every charge before `rolled_until`
    (a UTC midnight) is summed there."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    rolled_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"charges before {self.rolled_until:%Y-%m-%d} summed"
