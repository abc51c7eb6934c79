"""Catalog writes: the declarative catalog loader and the operator's provider credentials."""

from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from byok.crypto import mask_secret, seal
from routing.models import AdapterKind, Endpoint, Model, Provider

PROVIDER_FIELDS = ("name", "adapter", "credential_kind", "base_url", "api_key_env", "zdr", "retains_prompts",
                   "trains_on_prompts",
                   "region", "status", "is_local_standin", "allow_private_network", "docs_url")
MODEL_FIELDS = ("name", "description", "created", "context_length", "input_modalities", "output_modalities",
                "supported_parameters", "tokenizer")
PRICE_FIELDS = {"prompt": "price_prompt", "completion": "price_completion", "cached_input": "price_cached_input",
                "cache_write": "price_cache_write", "reasoning": "price_reasoning", "request": "price_request"}


class CatalogError(ValueError):
    pass


@dataclass(frozen=True)
class CatalogLoadResult:
    providers: int
    models: int
    endpoints: int


def catalog_load(*, data: dict) -> CatalogLoadResult:
    """Upsert providers (by slug), models (by id) and endpoints (by model and provider). Idempotent."""
    providers, models, endpoints = 0, 0, 0
    with transaction.atomic():
        for row in data.get("providers") or []:
            _require(row, "slug", "name", "adapter", "base_url")
            if row["adapter"] not in AdapterKind.values:
                raise CatalogError(f"provider {row['slug']}: unknown adapter {row['adapter']!r}")
            Provider.objects.update_or_create(slug=row["slug"], defaults=_pick(row, PROVIDER_FIELDS))
            providers += 1
        for row in data.get("models") or []:
            _require(row, "id", "name", "context_length")
            if row["id"].count("/") != 1:
                raise CatalogError(f"model id {row['id']!r} must look like <author>/<slug>")
            model, _ = Model.objects.update_or_create(id=row["id"], defaults=_pick(row, MODEL_FIELDS))
            models += 1
            for endpoint_row in row.get("endpoints") or []:
                _endpoint_upsert(model, endpoint_row)
                endpoints += 1
    return CatalogLoadResult(providers=providers, models=models, endpoints=endpoints)


def _endpoint_upsert(model: Model, row: dict) -> None:
    _require(row, "provider", "upstream_model", "pricing")
    provider = Provider.objects.filter(slug=row["provider"]).first()
    if provider is None:
        raise CatalogError(f"model {model.id}: unknown provider {row['provider']!r}")
    defaults = {
        "upstream_model": row["upstream_model"],
        "context_length": row.get("context_length", model.context_length),
        "max_completion_tokens": row.get("max_completion_tokens"),
        "quantization": row.get("quantization", "unknown"),
        "supported_parameters": row.get("supported_parameters", model.supported_parameters),
        "service_tiers": row.get("service_tiers", []),
        "enabled": row.get("enabled", True),
    }
    for key, field in PRICE_FIELDS.items():
        value = row["pricing"].get(key)
        if value is not None:
            defaults[field] = Decimal(str(value))
        elif field in ("price_prompt", "price_completion"):
            raise CatalogError(f"model {model.id} @ {provider.slug}: pricing.{key} is required")
    Endpoint.objects.update_or_create(model=model, provider=provider, defaults=defaults)


def provider_credential_set(*, provider: Provider, plaintext: str | None) -> Provider:
    """Seal (or with None, remove) the operator's credential for a provider."""
    if plaintext:
        sealed = seal(plaintext, aad=f"provider:{provider.pk}")
        provider.credential_sealed, provider.credential_key_id = sealed.blob, sealed.key_id
        provider.credential_label = mask_secret(plaintext)
    else:
        provider.credential_sealed, provider.credential_key_id, provider.credential_label = None, "", ""
    provider.save(update_fields=["credential_sealed", "credential_key_id", "credential_label", "updated_at"])
    return provider  # saving bumped the catalog version (routing.snapshot)


def _require(row: dict, *names: str) -> None:
    missing = [name for name in names if row.get(name) in (None, "")]
    if missing:
        raise CatalogError(f"catalog entry {row.get('slug') or row.get('id') or row!r} lacks {', '.join(missing)}")


def _pick(row: dict, names: tuple[str, ...]) -> dict:
    return {name: row[name] for name in names if name in row}


def account_routing_update(*, account_id, changes: dict):
    """Create or update an account's routing defaults (only the given fields)."""
    from routing.models import AccountRoutingSettings

    settings_row, _ = AccountRoutingSettings.objects.get_or_create(account_id=account_id)
    for name, value in changes.items():
        setattr(settings_row, name, value)
    settings_row.save()
    return settings_row


def provider_reseal_all() -> int:
    """Re-encrypt every operator credential under the keyring's newest key; returns how many changed."""
    from byok.crypto import Sealed, current_key_id, unseal

    newest, changed = current_key_id(), 0
    for provider in Provider.objects.exclude(credential_sealed=None).exclude(credential_key_id=newest):
        aad = f"provider:{provider.pk}"
        plaintext = unseal(Sealed(key_id=provider.credential_key_id, blob=bytes(provider.credential_sealed)), aad=aad)
        sealed = seal(plaintext, aad=aad)
        provider.credential_sealed, provider.credential_key_id = sealed.blob, sealed.key_id
        provider.save(update_fields=["credential_sealed", "credential_key_id", "updated_at"])
        changed += 1
    return changed
