"""GET /models and /models/user from the catalog snapshot: the records are rendered once per catalog version.

Rendering the catalog per request (queries with prefetches, then a serializer per model) cost tens of
milliseconds of CPU for any key, and a connection pipelining /models requests held a worker that long per
request. The listing is now built once per catalog snapshot (`CatalogSnapshot.cached`), which is replaced when
the catalog version changes: a provider, model, endpoint or search engine saved, an operator credential set or
removed (a provider save), a BYOK key or an account's routing settings saved or deleted. A request filters the
built records in memory (query parameters, then the caller's limits) and renders the page.

What varies per caller is its routing limits (its guardrails; for /models/user also its account's routing
settings) and what it can be served (routing.selection.Routable: an operator credential for a provider of the
model, or a BYOK key of the caller's that applies): /models lists the whole catalog with each entry's `available`
flag for this caller, /models/user only the available entries. The rendered body of the plain listing (no query
parameters, the common request) is kept per snapshot, per account, per API key (a BYOK key's filters name API
keys and members) and per limits, so one caller's view is never served to another, and a change to a guardrail
(a new set of limits) is a new entry, not a stale one. A credential set or removed, or a BYOK key saved, replaces
the snapshot: the flags follow."""

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from routing.catalog import EndpointInfo
from routing.limits import RoutingLimit, allowed_by
from routing.models import Endpoint, ModelKind
from routing.selection import Routable
from routing.selectors import models_list
from routing.serializers import model_record
from routing.snapshot import CatalogSnapshot

# (path, account, API key hash, the caller's limits): one rendered body each.
ListingKey = tuple[str, UUID, str, tuple[RoutingLimit, ...]]

# Bytes of rendered plain listings kept per snapshot (about 1 KB per model per account and limits); past it they
# are dropped and rendered again, so many accounts cannot grow a process without bound.
RENDERED_MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ListedModel:
    id: str
    kind: str
    searchable: tuple[str, ...]  # id, name, description, lower-cased: `q` matches any
    supported_parameters: tuple[str, ...]
    input_modalities: tuple[str, ...]
    output_modalities: tuple[str, ...]
    provider_slugs: frozenset[str]  # of every endpoint of the model, as the `providers` filter has always matched
    record: dict[str, Any]  # the rendered /models entry


def _build() -> tuple[ListedModel, ...]:
    slugs: dict[str, set[str]] = {}
    for model_id, slug in Endpoint.objects.values_list("model_id", "provider__slug"):
        slugs.setdefault(model_id, set()).add(slug)
    return tuple(
        ListedModel(
            id=model.id,
            kind=model.kind,
            searchable=tuple(text.lower() for text in (model.id, model.name, model.description or "")),
            supported_parameters=tuple(model.supported_parameters or ()),
            input_modalities=tuple(model.input_modalities or ()),
            output_modalities=tuple(model.output_modalities or ()),
            provider_slugs=frozenset(slugs.get(model.id, ())),
            record=model_record(model),
        )
        for model in models_list()  # the listing's queries, run once per catalog version
    )


def listed_models(*, snapshot: CatalogSnapshot) -> tuple[ListedModel, ...]:
    """Every listed model (newest first), built once per snapshot (concurrent first uses share one build)."""
    return snapshot.cached(("models_listing",), _build)


def models_filter(
    models: Sequence[ListedModel],
    *,
    q: str = "",
    supported_parameters: Sequence[str] = (),
    input_modalities: Sequence[str] = (),
    output_modalities: Sequence[str] = (),
    providers: Sequence[str] = (),
) -> list[ListedModel]:
    needle = q.lower()
    wanted = set(providers)
    return [
        model
        for model in models
        if (not needle or any(needle in text for text in model.searchable))
        and (not wanted or model.provider_slugs & wanted)
        and all(item in model.supported_parameters for item in supported_parameters)
        and all(item in model.input_modalities for item in input_modalities)
        and all(item in model.output_modalities for item in output_modalities)
    ]


def models_allowed(
    models: Sequence[ListedModel], *, limits: tuple[RoutingLimit, ...], snapshot: CatalogSnapshot
) -> list[ListedModel]:
    """The models the caller's limits leave an endpoint of (a router has none of its own: it routes to what the
    caller may use, so it stays)."""
    if not limits:
        return list(models)
    endpoints: dict[str, tuple[EndpointInfo, ...]] = snapshot.endpoints_by_model
    return [m for m in models if m.kind == ModelKind.ROUTER or allowed_by(limits, endpoints.get(m.id, ()))]


def models_available(models: Sequence[ListedModel], *, routable: Routable) -> dict[str, bool]:
    """Model id -> whether a request for it can be served for this caller now (an endpoint is routable); a router
    (no endpoint of its own) is available when one of the listed chat models is."""
    available = {m.id: m.kind != ModelKind.ROUTER and routable.model(m.id) for m in models}
    any_model = any(available.values())
    return {m.id: any_model if m.kind == ModelKind.ROUTER else available[m.id] for m in models}


def caller_record(model: ListedModel, *, available: bool) -> dict[str, Any]:
    """The /models entry as this caller sees it: the catalog record and whether it is served for the caller."""
    return {**model.record, "available": available}


class RenderedListings:
    """Rendered bodies of the plain listing, per (path, account, limits), for one snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[ListingKey, bytes] = {}
        self._size = 0

    def get(self, key: ListingKey) -> bytes | None:
        return self._bodies.get(key)

    def put(self, key: ListingKey, body: bytes) -> None:
        if len(body) > RENDERED_MAX_BYTES:
            return  # rendered per request
        with self._lock:
            if self._size + len(body) > RENDERED_MAX_BYTES:
                self._bodies.clear()
                self._size = 0
            previous = self._bodies.get(key)
            self._size += len(body) - (len(previous) if previous is not None else 0)
            self._bodies[key] = body

    def __len__(self) -> int:
        return len(self._bodies)


def rendered_listings(*, snapshot: CatalogSnapshot) -> RenderedListings:
    return snapshot.cached(("models_rendered",), RenderedListings)
