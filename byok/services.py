"""BYOK writes: create, update (filters, order, rotation in place), delete, and re-sealing on key rotation."""

from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import F, QuerySet

from byok.crypto import Sealed as SealedBlob
from byok.crypto import current_key_id, seal, unseal
from byok.models import ByokKey
from byok.shapes import ParsedCredential

FILTERS = ("allowed_models", "allowed_api_key_hashes", "allowed_user_ids")


def _seal_into(key: ByokKey, credential: ParsedCredential) -> None:
    sealed = seal(credential.material, aad=f"byok:{key.id}")
    key.sealed, key.key_id, key.label = sealed.blob, sealed.key_id, credential.label
    key.serves_models = credential.serves_models


def _section(key: ByokKey) -> QuerySet[ByokKey]:
    return ByokKey.objects.filter(
        account_id=key.account_id, workspace_id=key.workspace_id, provider=key.provider, is_fallback=key.is_fallback
    )


def byok_key_create(
    *,
    account_id: UUID,
    workspace_id: UUID,
    provider: str,
    kind: str,
    credential: ParsedCredential,
    name: str = "",
    disabled: bool = False,
    is_fallback: bool = False,
    shared_capacity: str = "always",
    filters: dict[str, list[str] | None] | None = None,
) -> ByokKey:
    """A new key, last in its section (Prioritized or Fallback) of its provider."""
    with transaction.atomic():
        key = ByokKey(
            account_id=account_id,
            workspace_id=workspace_id,
            provider=provider,
            kind=kind,
            name=name,
            disabled=disabled,
            is_fallback=is_fallback,
            shared_capacity=shared_capacity,
            **{name_: (filters or {}).get(name_) for name_ in FILTERS},
        )
        key.sort_order = _section(key).count()
        _seal_into(key, credential)
        key.save()
    return key


def byok_key_update(*, key: ByokKey, changes: dict[str, Any], credential: ParsedCredential | None = None) -> ByokKey:
    """Omitted fields stay; `None` clears a filter; an array replaces it. `sort_order` moves the key within
    its section and shifts the others; `is_fallback` moves it to the end of the other section; a new
    `credential` rotates the material in place (same id, filters and position)."""
    with transaction.atomic():
        key = ByokKey.objects.select_for_update().get(pk=key.pk)
        if "is_fallback" in changes and changes["is_fallback"] != key.is_fallback:
            _section(key).filter(sort_order__gt=key.sort_order).update(sort_order=F("sort_order") - 1)
            key.is_fallback = changes["is_fallback"]
            key.sort_order = _section(key).exclude(pk=key.pk).count()
        for name in ("name", "disabled", "shared_capacity", *FILTERS):
            if name in changes:
                setattr(key, name, changes[name])
        if "sort_order" in changes:
            _move(key, changes["sort_order"])
        if credential is not None:
            _seal_into(key, credential)
        key.save()
    return key


def _move(key: ByokKey, target: int) -> None:
    others = list(_section(key).exclude(pk=key.pk).order_by("sort_order", "created_at"))
    target = max(0, min(target, len(others)))
    others.insert(target, key)
    for position, item in enumerate(others):
        if item.pk != key.pk and item.sort_order != position:
            ByokKey.objects.filter(pk=item.pk).update(sort_order=position)
    key.sort_order = target


def byok_key_delete(*, key: ByokKey) -> None:
    with transaction.atomic():
        _section(key).filter(sort_order__gt=key.sort_order).update(sort_order=F("sort_order") - 1)
        key.delete()


def byok_reseal_all() -> int:
    """Re-encrypt every key under the keyring's newest key; returns how many rows changed."""
    newest, changed = current_key_id(), 0
    for key in ByokKey.objects.exclude(key_id=newest).only("id", "sealed", "key_id").iterator():
        plaintext = unseal(SealedBlob(key_id=key.key_id, blob=bytes(key.sealed)), aad=f"byok:{key.id}")
        sealed = seal(plaintext, aad=f"byok:{key.id}")
        ByokKey.objects.filter(pk=key.pk, key_id=key.key_id).update(sealed=sealed.blob, key_id=sealed.key_id)
        changed += 1
    return changed
