"""An in-process snapshot of the routable catalog, rebuilt when the catalog version changes.

A request runs no query for it: the version is a counter of gateway.versions, which each process re-reads
at most every CACHE_VERSION_CHECK_SECONDS. Saving a provider, model, endpoint, account routing settings or
BYOK key (admin, loader, services, API) bumps it when the change commits, so changes route at once in the
process that made them and within that window in every other. Bulk `QuerySet.update()` sends no signals:
call `catalog_changed()` after one."""

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from django.db import models, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from gateway.versions.counters import Flights, version_bump, version_current
from routing.catalog import EndpointInfo, endpoint_info
from routing.models import AccountRoutingSettings, Endpoint, Model, Provider, ProviderStatus, SearchEngine

Loaded = TypeVar("Loaded")

VERSION = "catalog"


@dataclass(frozen=True)
class ProviderSecret:
    """Where a provider's operator credential lives: sealed in the database and/or a named env var."""

    provider_id: int
    sealed: bytes | None
    key_id: str
    env_var: str


@dataclass(frozen=True)
class CatalogSnapshot:
    version: str  # the catalog version it was built under (gateway.versions token)
    models: frozenset[str]
    endpoints_by_model: dict[str, tuple[EndpointInfo, ...]]
    secrets: dict[str, ProviderSecret]
    # Per-account routing data (routing defaults, BYOK key filters), loaded on first use; it lives and dies
    # with the snapshot, and saving either bumps the version like a catalog change.
    per_account: dict[Hashable, Any] = field(default_factory=dict)  # each key's own kind of value
    _loading: Flights[Hashable, Any] = field(default_factory=Flights, repr=False, compare=False)

    def cached(self, key: Hashable, load: Callable[[], Loaded]) -> Loaded:
        """`load()`'s value, loaded once per snapshot (concurrent first uses share one load)."""
        if key not in self.per_account:
            self.per_account[key] = self._loading.load(key, load)
        loaded: Loaded = self.per_account[key]
        return loaded


_lock = threading.Lock()
_current: CatalogSnapshot | None = None


def catalog_changed() -> None:
    """Every process rebuilds its snapshot: this one at once, the others within the version window."""
    version_bump(VERSION)


@receiver([post_save, post_delete], sender=Provider)
@receiver([post_save, post_delete], sender=Model)
@receiver([post_save, post_delete], sender=Endpoint)
@receiver([post_save, post_delete], sender=SearchEngine)
@receiver([post_save, post_delete], sender=AccountRoutingSettings)
# By label: routing reads BYOK keys only through byok.selectors (pyproject.toml: each app's models are its own).
@receiver([post_save, post_delete], sender="byok.ByokKey")
def _bump_version(sender: type[models.Model] | str, **kwargs: object) -> None:
    catalog_changed()


def search_engine_prices() -> dict[str, Decimal]:
    """The catalog's web search engine prices (USD per search), cached with the snapshot (a change to one bumps
    the catalog version like any catalog change)."""
    return current_snapshot().cached(
        ("search_engine_prices",), lambda: dict(SearchEngine.objects.values_list("engine", "price_per_search"))
    )


def _build(version: str) -> CatalogSnapshot:
    endpoints: dict[str, list[EndpointInfo]] = {}
    rows = (
        Endpoint.objects.filter(enabled=True, provider__status=ProviderStatus.ACTIVE)
        .select_related("provider", "model")
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
    """The snapshot of the current catalog version; built under the version read before the build, so a
    change committed during the build makes the next call build again."""
    global _current
    version = version_current(VERSION)
    snapshot = _current
    if snapshot is not None and snapshot.version == version:
        return snapshot
    with _lock:
        snapshot = _current
        if snapshot is None or snapshot.version != version:  # another thread may have built it meanwhile
            with transaction.atomic():
                snapshot = _current = _build(version)
    return snapshot
