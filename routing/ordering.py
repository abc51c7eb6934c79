"""Which of a request's endpoints are eligible, and in what order they are tried.

Each strategy is a small function: filters (hard constraints), then one ordering (provider order,
an explicit sort, or the default price-weighted load balancing), then soft preferences, health and
stickiness adjust that order."""

import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from routing.catalog import EndpointInfo
from routing.health import EndpointStats
from routing.preferences import Preferences, slug_matches

RNG = random.Random()  # tests reseed it for reproducible load balancing
UNKNOWN = float("inf")


@dataclass(frozen=True)
class Ordering:
    endpoints: tuple[EndpointInfo, ...]
    excluded_by: frozenset[str]
    basis: str  # how the order was decided, for gateway_metadata.summary


def _price(endpoint: EndpointInfo) -> Decimal:
    return endpoint.price_prompt + endpoint.price_completion


def _exclusion(endpoint: EndpointInfo, prefs: Preferences, used_params: frozenset[str]) -> str | None:
    slug = endpoint.provider_slug
    if any(slug_matches(pattern, slug) for pattern in prefs.ignore):
        return "allowed_providers"
    if prefs.only is not None and not any(slug_matches(pattern, slug) for pattern in prefs.only):
        return "allowed_providers"
    if prefs.account_allowed is not None and not any(slug_matches(p, slug) for p in prefs.account_allowed):
        return "allowed_providers"
    if prefs.zdr and not endpoint.zdr:
        return "data_policy:zdr"
    if prefs.deny_data_collection and (endpoint.retains_prompts or endpoint.trains_on_prompts):
        return "data_policy:training"
    if prefs.quantizations is not None and endpoint.quantization not in prefs.quantizations:
        return "quantization"
    caps = prefs.max_price
    if (
        ("prompt" in caps and endpoint.price_prompt > Decimal(str(caps["prompt"])))
        or ("completion" in caps and endpoint.price_completion > Decimal(str(caps["completion"])))
        or ("request" in caps and endpoint.price_request > Decimal(str(caps["request"])))
    ):
        return "max_price"
    if prefs.require_parameters and not used_params <= set(endpoint.supported_parameters):
        return "require_parameters"
    if prefs.order and not prefs.allow_fallbacks and not any(slug_matches(p, slug) for p in prefs.order):
        return "allowed_providers"
    return None


def _weighted_first(endpoints: list[EndpointInfo], rng: random.Random) -> list[EndpointInfo]:
    """Default load balancing: the first pick weighted by the inverse square of price; the rest by price."""
    by_price = sorted(endpoints, key=lambda e: (_price(e), e.id))
    if len(by_price) < 2:
        return by_price
    weights = [1 / float(_price(e)) ** 2 if _price(e) > 0 else 1e12 for e in by_price]
    first = rng.choices(by_price, weights=weights)[0]
    return [first] + [e for e in by_price if e is not first]


# (a measure, if sorting by one; the price; the id). None only where mypy cannot see the check before it.
SortKey = tuple[float | Decimal | int | None, ...]


def _sort_key(by: str, stats: dict[int, EndpointStats]) -> Callable[[EndpointInfo], SortKey]:
    def stat(endpoint: EndpointInfo, name: str) -> float | None:
        values = getattr(stats.get(endpoint.id) or EndpointStats(), name)
        return values["p50"] if values else None

    if by == "throughput":
        return lambda e: (-(stat(e, "throughput") or 0), _price(e), e.id)
    if by == "latency":
        return lambda e: (stat(e, "latency") if stat(e, "latency") is not None else UNKNOWN, _price(e), e.id)
    return lambda e: (_price(e), e.id)  # price (and exacto: cheapest first)


def _by_provider_order(endpoints: list[EndpointInfo], order: tuple[str, ...]) -> list[EndpointInfo]:
    def rank(endpoint: EndpointInfo) -> int:
        return next((i for i, p in enumerate(order) if slug_matches(p, endpoint.provider_slug)), len(order))

    return sorted(endpoints, key=lambda e: (rank(e), _price(e), e.id))


def _misses_soft_targets(endpoint: EndpointInfo, prefs: Preferences, stats: dict[int, EndpointStats]) -> bool:
    measured = stats.get(endpoint.id) or EndpointStats()
    for name, floor in prefs.min_throughput.items():
        if measured.throughput and measured.throughput.get(name, UNKNOWN) < floor:
            return True
    for name, ceiling in prefs.max_latency.items():
        if measured.latency and measured.latency.get(name, 0) > ceiling:
            return True
    return False


def order_endpoints(
    *,
    groups: list[list[EndpointInfo]],
    prefs: Preferences,
    used_params: frozenset[str],
    stats: dict[int, EndpointStats],
    sticky_endpoint_id: int | None = None,
    rng: random.Random | None = None,
) -> Ordering:
    rng = rng or RNG
    excluded: set[str] = set()
    eligible_groups = []
    for group in groups:
        kept = []
        for endpoint in group:
            reason = _exclusion(endpoint, prefs, used_params)
            if reason:
                excluded.add(reason)
            else:
                kept.append(endpoint)
        eligible_groups.append(kept)
    if prefs.partition == "none":
        eligible_groups = [[e for group in eligible_groups for e in group]]

    ordered: list[EndpointInfo] = []
    for group in eligible_groups:
        ordered.extend(_order_group(group, prefs, used_params, stats, sticky_endpoint_id, rng))
    if not prefs.allow_fallbacks and not prefs.order and ordered:
        ordered = ordered[:1]
    return Ordering(endpoints=tuple(ordered), excluded_by=frozenset(excluded), basis=_basis(prefs))


def _order_group(
    group: list[EndpointInfo],
    prefs: Preferences,
    used_params: frozenset[str],
    stats: dict[int, EndpointStats],
    sticky_endpoint_id: int | None,
    rng: random.Random,
) -> list[EndpointInfo]:
    healthy = [e for e in group if (stats.get(e.id) or EndpointStats()).healthy]
    unhealthy = [e for e in group if e not in healthy]
    if prefs.order:
        ordered = _by_provider_order(healthy, prefs.order)
    elif prefs.sort_by:
        ordered = sorted(healthy, key=_sort_key(prefs.sort_by, stats))
    else:
        ordered = _weighted_first(healthy, rng)
        if sticky_endpoint_id is not None:
            sticky = [e for e in ordered if e.id == sticky_endpoint_id]
            ordered = sticky + [e for e in ordered if e.id != sticky_endpoint_id]
    # Soft preferences: never exclude, only move behind the endpoints that meet them.
    if "tools" in used_params:
        ordered = [e for e in ordered if "tools" in e.supported_parameters or not e.supported_parameters] + [
            e for e in ordered if e.supported_parameters and "tools" not in e.supported_parameters
        ]
    if prefs.min_throughput or prefs.max_latency:
        ordered = [e for e in ordered if not _misses_soft_targets(e, prefs, stats)] + [
            e for e in ordered if _misses_soft_targets(e, prefs, stats)
        ]
    return ordered + sorted(unhealthy, key=lambda e: (_price(e), e.id))


def _basis(prefs: Preferences) -> str:
    if prefs.order:
        return f"provider order {list(prefs.order)}"
    if prefs.sort_by:
        return f"sorted by {prefs.sort_by}" + (" across all models" if prefs.partition == "none" else "")
    return "load-balanced by inverse square of price"
