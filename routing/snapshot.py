"""An in-process snapshot of the routable catalog, rebuilt when the catalog version changes.

Each request reads one small row (the version) instead of the catalog; saving a provider, model, endpoint,
account routing settings or BYOK key (admin, loader, services, API) bumps the version, so changes route at
once in every process. Bulk `QuerySet.update()` sends no signals: call `catalog_changed()` after one."""

import threading
import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from byok.models import ByokKey
from routing.catalog import EndpointInfo, endpoint_info
from routing.models import AccountRoutingSettings, CatalogVersion, Endpoint, Model, Provider, ProviderStatus


@dataclass(frozen=True)
class ProviderSecret:
    """Where a provider's operator credential lives: sealed in the database and/or a named env var."""

    provider_id: int
    sealed: bytes | None
    key_id: str
    env_var: str


@dataclass(frozen=True)
class CatalogSnapshot:
    version: str | None
    models: frozenset[str]
    endpoints_by_model: dict[str, tuple[EndpointInfo, ...]]
    secrets: dict[str, ProviderSecret]
    # Per-account routing data (routing defaults, BYOK key filters), loaded on first use; it lives and dies
    # with the snapshot, and saving either bumps the version like a catalog change.
    per_account: dict = field(default_factory=dict)

    def cached(self, key, load):
        if key not in self.per_account:
            self.per_account[key] = load()
        return self.per_account[key]


_lock = threading.Lock()
_current: CatalogSnapshot | None = None


def catalog_changed() -> None:
    CatalogVersion.objects.update_or_create(pk=1, defaults={"value": uuid.uuid4().hex})


@receiver([post_save, post_delete], sender=Provider)
@receiver([post_save, post_delete], sender=Model)
@receiver([post_save, post_delete], sender=Endpoint)
@receiver([post_save, post_delete], sender=AccountRoutingSettings)
@receiver([post_save, post_delete], sender=ByokKey)
def _bump_version(sender, **kwargs) -> None:
    catalog_changed()


def _build(version: str | None) -> CatalogSnapshot:
    endpoints: dict[str, list[EndpointInfo]] = {}
    rows = (
        Endpoint.objects.filter(enabled=True, provider__status=ProviderStatus.ACTIVE)
        .select_related("provider")
        .order_by("price_prompt", "price_completion", "id")
    )
    for row in rows:
        endpoints.setdefault(row.model_id, []).append(endpoint_info(row))
    secrets = {
        provider.slug: ProviderSecret(
            provider_id=provider.pk,
            key_id=provider.credential_key_id,
            sealed=bytes(provider.credential_sealed) if provider.credential_sealed else None,
            env_var=provider.api_key_env,
        )
        for provider in Provider.objects.only("id", "slug", "credential_sealed", "credential_key_id", "api_key_env")
    }
    return CatalogSnapshot(
        version=version,
        models=frozenset(Model.objects.values_list("pk", flat=True)),
        endpoints_by_model={k: tuple(v) for k, v in endpoints.items()},
        secrets=secrets,
    )


def current_snapshot() -> CatalogSnapshot:
    global _current
    version = CatalogVersion.objects.filter(pk=1).values_list("value", flat=True).first()
    snapshot = _current
    if snapshot is not None and snapshot.version == version and version is not None:
        return snapshot
    with _lock, transaction.atomic():
        snapshot = _build(version)
        _current = snapshot
    return snapshot
