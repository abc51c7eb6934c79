import uuid

from django.db import models


class SharedCapacity(models.TextChoices):
    """Rule 5: what a prioritized key allows on its provider's shared endpoints."""

    ALWAYS = "always", "Use shared capacity (key first, then shared endpoints)"
    OUTSIDE_FILTER = "outside_filter", "Only for models outside the key's model filter"
    NEVER = "never", "Never use shared capacity on this provider"


class ByokKey(models.Model):
    """A customer's provider credential. The material is sealed (AES-256-GCM, bound to this row's id)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="byok_keys")
    workspace = models.ForeignKey("accounts.Workspace", on_delete=models.CASCADE, related_name="byok_keys")
    provider = models.CharField(max_length=100, help_text="Provider slug")
    kind = models.CharField(max_length=10, default="api_key", editable=False, help_text="Credential shape")
    sealed = models.BinaryField(editable=False)
    key_id = models.CharField(max_length=40, editable=False, help_text="Keyring entry that sealed it")
    label = models.CharField(max_length=60, editable=False)
    name = models.CharField(max_length=200, blank=True)
    disabled = models.BooleanField(default=False)
    is_fallback = models.BooleanField(default=False)
    sort_order = models.IntegerField(default=0)
    allowed_models = models.JSONField(null=True, blank=True)
    allowed_api_key_hashes = models.JSONField(null=True, blank=True)
    allowed_user_ids = models.JSONField(null=True, blank=True)
    shared_capacity = models.CharField(max_length=20, choices=SharedCapacity.choices, default=SharedCapacity.ALWAYS)
    serves_models = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="Azure keys: the model slugs their per-deployment configs serve ('*': a catalog config serves any "
        "model), kept in the clear so routing never decrypts a key to plan; null: any model",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "is_fallback", "sort_order", "created_at"]
        indexes = [models.Index(fields=["account", "workspace", "provider"])]

    def __str__(self) -> str:
        return f"{self.provider} {self.label}"
