"""BYOK reads. This module is the one place a stored secret is decrypted for use: a customer's key
(`byok_credentials`) or an operator's provider credential (`operator_credentials`), each just before the
attempt that sends it."""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import QuerySet

from byok.credentials import ProviderCredentials
from byok.crypto import Sealed, unseal
from byok.models import ByokKey
from byok.shapes import restore
from gateway.errors import NotFound

MSG_BYOK_NOT_FOUND = "BYOK key not found"


@dataclass(frozen=True)
class ByokKeyInfo:
    """What routing needs to decide whether a key applies (no key material)."""

    id: UUID
    provider: str
    is_fallback: bool
    sort_order: int
    allowed_models: tuple[str, ...] | None
    allowed_api_key_hashes: tuple[str, ...] | None
    allowed_user_ids: tuple[str, ...] | None
    shared_capacity: str
    kind: str = "api_key"
    serves_models: tuple[str, ...] | None = None  # None: any model (see ByokKey.serves_models)

    def applies(self, *, model_id: str, api_key_hash: str, user_id: str | None) -> bool:
        """Rule 4: every active filter must match."""
        if self.allowed_models is not None and model_id not in self.allowed_models:
            return False
        if self.allowed_api_key_hashes is not None and api_key_hash not in self.allowed_api_key_hashes:
            return False
        return self.allowed_user_ids is None or (user_id is not None and user_id in self.allowed_user_ids)


def byok_keys_list(
    *, account_id: UUID, provider: str | None = None, workspace_id: UUID | None = None
) -> QuerySet[ByokKey]:
    keys = ByokKey.objects.filter(account_id=account_id).order_by("provider", "is_fallback", "sort_order", "created_at")
    if provider:
        keys = keys.filter(provider=provider)
    if workspace_id:
        keys = keys.filter(workspace_id=workspace_id)
    return keys


def byok_key_get(*, account_id: UUID, key_id: UUID) -> ByokKey:
    key = ByokKey.objects.filter(account_id=account_id, pk=key_id).first()
    if key is None:
        raise NotFound(MSG_BYOK_NOT_FOUND)
    return key


def byok_keys_for_routing(*, account_id: UUID, workspace_id: UUID) -> list[ByokKeyInfo]:
    rows = (
        ByokKey.objects.filter(account_id=account_id, workspace_id=workspace_id, disabled=False)
        .only(
            "id",
            "provider",
            "is_fallback",
            "sort_order",
            "allowed_models",
            "allowed_api_key_hashes",
            "allowed_user_ids",
            "shared_capacity",
            "kind",
            "serves_models",
            "created_at",
        )
        .order_by("sort_order", "created_at")
    )
    return [
        ByokKeyInfo(
            id=row.id,
            provider=row.provider,
            is_fallback=row.is_fallback,
            sort_order=row.sort_order,
            allowed_models=_tuple(row.allowed_models),
            allowed_api_key_hashes=_tuple(row.allowed_api_key_hashes),
            allowed_user_ids=_tuple(row.allowed_user_ids),
            shared_capacity=row.shared_capacity,
            kind=row.kind,
            serves_models=_tuple(row.serves_models),
        )
        for row in rows
    ]


def byok_key_serves(*, key: ByokKeyInfo, model_id: str) -> bool:
    """Whether the key has credentials for this model, known without decrypting it: an Azure key's configs
    are summarized in the clear when it is saved (`serves_models`, the same rule as `azure_config_for`)."""
    if key.serves_models is None:
        return True
    return model_id in key.serves_models or "*" in key.serves_models


def operator_credentials(*, provider_id: int, key_id: str, sealed: bytes) -> ProviderCredentials:
    """An operator's sealed provider credential, decrypted for the attempt about to send it."""
    return ProviderCredentials(api_key=unseal(Sealed(key_id=key_id, blob=sealed), aad=f"provider:{provider_id}"))


def byok_credentials(*, key_id: UUID, model_id: str) -> ProviderCredentials | None:
    """Decrypt one key for the request about to use it (fails loudly with SecretsError, never returns an
    empty key). None when the key is gone or has nothing for this model (an Azure key with no config for it)."""
    row = ByokKey.objects.only("id", "kind", "sealed", "key_id").filter(pk=key_id).first()
    if row is None:  # deleted since the request was planned
        return None
    material = unseal(Sealed(key_id=row.key_id, blob=bytes(row.sealed)), aad=f"byok:{row.id}")
    parsed = restore(kind=row.kind, material=material)
    if row.kind == "azure":
        config = azure_config_for(parsed.extra if isinstance(parsed.extra, list) else [], model_id=model_id)
        if config is None:
            return None
        return ProviderCredentials(
            api_key=config["api_key"], is_byok=True, byok_key_id=row.id, extra={"azure_config": config}
        )
    extra = parsed.extra if isinstance(parsed.extra, dict) else {}
    return ProviderCredentials(api_key=parsed.api_key, is_byok=True, byok_key_id=row.id, extra=extra)


def azure_config_for(configs: list[dict[str, Any]], *, model_id: str) -> dict[str, Any] | None:
    """A per-deployment config wins for its `model_slug`; otherwise the first catalog config serves."""
    for config in configs:
        if config.get("endpoint_url") and config.get("model_slug") == model_id:
            return config
    return next((config for config in configs if config.get("resource_name")), None)


def _tuple(value: list[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)
