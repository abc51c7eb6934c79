"""Routing preferences: the request's `provider` object merged with the account's defaults (which a
request can only tighten), plus model-suffix shortcuts (`:nitro`, `:floor`) and the deprecated `route`."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from routing.models import AccountRoutingSettings

if TYPE_CHECKING:
    from routing.snapshot import CatalogSnapshot

SUFFIXES: dict[str, tuple[str | None, str | None]] = {
    "nitro": ("throughput", "priority"),
    "floor": ("price", "flex"),
    "online": (None, None),  # no routing preference: the `web` plugin (plugins/web/stage.py reads ctx.suffix)
}
ROUTE_PARTITION = {"fallback": "model", "sort": "none"}


@dataclass(frozen=True)
class AccountDefaults:
    allowed_providers: tuple[str, ...] = ()
    ignored_providers: tuple[str, ...] = ()
    enforce_zdr: bool = False
    data_collection: str = "allow"


@dataclass(frozen=True)
class Preferences:
    order: tuple[str, ...] = ()
    allow_fallbacks: bool = True
    only: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    require_parameters: bool = False
    deny_data_collection: bool = False
    zdr: bool = False
    quantizations: tuple[str, ...] | None = None
    sort_by: str | None = None
    partition: str = "model"
    max_price: dict[str, Any] = field(default_factory=dict)  # USD per million tokens / per request
    min_throughput: dict[str, Any] = field(default_factory=dict)  # {"p50": tokens/s, ...}
    max_latency: dict[str, Any] = field(default_factory=dict)  # {"p50": seconds, ...}
    service_tier: str | None = None
    account_allowed: tuple[str, ...] | None = None  # the account's allow-list: a ceiling for `only`


def account_defaults(*, account_id: UUID, snapshot: "CatalogSnapshot | None" = None) -> AccountDefaults:
    """The account's routing defaults (through the catalog snapshot's per-account cache when given)."""
    if snapshot is not None:
        return snapshot.cached(("routing-defaults", account_id), lambda: account_defaults(account_id=account_id))
    row = AccountRoutingSettings.objects.filter(account_id=account_id).first()
    if row is None:
        return AccountDefaults()
    return AccountDefaults(
        allowed_providers=tuple(row.allowed_providers or ()),
        ignored_providers=tuple(row.ignored_providers or ()),
        enforce_zdr=row.enforce_zdr,
        data_collection=row.data_collection,
    )


def split_model_suffix(model: str) -> tuple[str, str | None]:
    """'openai/gpt-4o:nitro' -> ('openai/gpt-4o', 'nitro'); unknown suffixes stay part of the id."""
    base, sep, suffix = model.rpartition(":")
    if sep and suffix in SUFFIXES:
        return base, suffix
    return model, None


def preferences_build(
    *,
    provider: dict[str, Any] | None,
    route: str | None,
    service_tier: str | None,
    suffix: str | None,
    account: AccountDefaults,
) -> Preferences:
    provider = provider or {}
    sort = provider.get("sort") or {}
    sort_by, partition = sort.get("by"), sort.get("partition") or "model"
    if route and not provider.get("sort"):
        partition = ROUTE_PARTITION[route]
    tier = service_tier if service_tier not in (None, "auto") else None
    if suffix:
        sort_by = sort_by or SUFFIXES[suffix][0]
        tier = tier or SUFFIXES[suffix][1]
    only = tuple(provider["only"]) if provider.get("only") is not None else None
    return Preferences(
        order=tuple(provider.get("order") or ()),
        allow_fallbacks=provider.get("allow_fallbacks") is not False,
        only=only,
        ignore=tuple(provider.get("ignore") or ()) + account.ignored_providers,
        require_parameters=bool(provider.get("require_parameters")),
        deny_data_collection=provider.get("data_collection") == "deny" or account.data_collection == "deny",
        zdr=bool(provider.get("zdr")) or account.enforce_zdr,
        quantizations=tuple(provider["quantizations"]) if provider.get("quantizations") else None,
        sort_by=sort_by,
        partition=partition,
        max_price={k: v for k, v in (provider.get("max_price") or {}).items() if v is not None},
        min_throughput=dict(provider.get("preferred_min_throughput") or {}),
        max_latency=dict(provider.get("preferred_max_latency") or {}),
        service_tier=tier,
        account_allowed=account.allowed_providers or None,
    )


def slug_matches(pattern: str, slug: str) -> bool:
    """A base slug matches all its variants: `google-vertex` matches `google-vertex/us-east5`."""
    pattern, slug = pattern.lower(), slug.lower()
    return slug == pattern or slug.startswith(pattern + "/")
