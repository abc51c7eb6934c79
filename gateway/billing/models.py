import uuid

from django.db import models

from gateway.accounts.models import Account, ApiKey


class EntryKind(models.TextChoices):
    TOPUP = "topup", "Top-up"
    REFUND = "refund", "Refund"
    RESERVE = "reserve", "Reservation"
    RELEASE = "release", "Reservation released"
    CHARGE = "charge", "Charge"


class ReservationStatus(models.TextChoices):
    HELD = "held", "Held"
    SETTLED = "settled", "Settled"
    RELEASED = "released", "Released"


class Reservation(models.Model):
    """Credits held for one request before its upstream call, settled or released afterwards."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="reservations")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    amount = models.DecimalField(max_digits=24, decimal_places=12)
    status = models.CharField(max_length=10, choices=ReservationStatus.choices, default=ReservationStatus.HELD)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.amount} {self.status}"


class LedgerEntry(models.Model):
    """Insert-only. The account's balance always equals the sum of its entries' amounts."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="ledger")
    kind = models.CharField(max_length=10, choices=EntryKind.choices)
    amount = models.DecimalField(max_digits=24, decimal_places=12, help_text="Signed USD; debits are negative.")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    reservation = models.ForeignKey(Reservation, null=True, blank=True, on_delete=models.PROTECT)
    generation_id = models.CharField(max_length=64, blank=True)
    is_byok = models.BooleanField(default=False)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name_plural = "ledger entries"
        constraints = [
            models.UniqueConstraint(
                fields=["reservation", "kind"],
                condition=models.Q(reservation__isnull=False),
                name="one_entry_per_reservation_kind",
            )
        ]
        indexes = [models.Index(fields=["api_key", "kind", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount}"


class Generation(models.Model):
    """One served (or failed) request. Holds no prompt or completion text."""

    id = models.CharField(max_length=64, primary_key=True)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="generations")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    workspace_id = models.UUIDField(null=True, blank=True)
    requested_model = models.CharField(max_length=256)
    model = models.CharField(max_length=256, blank=True, help_text="The model that served the request")
    provider = models.CharField(max_length=100, blank=True)
    endpoint_id = models.BigIntegerField(null=True, blank=True)
    upstream_id = models.CharField(max_length=256, blank=True)
    status = models.CharField(max_length=20, default="completed")  # completed | incomplete | failed
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
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return self.id
