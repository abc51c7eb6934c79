"""Limits on where a request may route that come from its caller's policy, not from the request (a guardrail:
allowed or ignored models and providers, zero data retention, no data collection). The plan leaves out what a
limit excludes; when limits leave nothing of what the catalog has for the request, it is refused with the
limit's status (403) naming where the limit came from, unlike the 404 of the request's own preferences."""

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.accounts.authentication import Caller
from routing.catalog import EndpointInfo
from routing.preferences import slug_matches


def model_matches(pattern: str, model_id: str) -> bool:
    """A model id or a wildcard (`anthropic/*`, `*/claude-*`), case-insensitive."""
    return fnmatch.fnmatchcase(model_id.lower(), pattern.lower())


@dataclass(frozen=True, slots=True)
class RoutingLimit:
    source: str  # who set it, as the refusal names it: 'guardrail "Team policy"'
    allowed_models: tuple[str, ...] | None = None
    ignored_models: tuple[str, ...] | None = None
    allowed_providers: tuple[str, ...] | None = None  # base slugs match their variants, as in routing
    ignored_providers: tuple[str, ...] | None = None
    zdr: bool = False
    deny_data_collection: bool = False
    status: int = 403

    def excludes(self, endpoint: EndpointInfo) -> bool:
        model, provider = endpoint.model_id, endpoint.provider_slug
        if self.allowed_models is not None and not any(model_matches(p, model) for p in self.allowed_models):
            return True
        if self.ignored_models and any(model_matches(p, model) for p in self.ignored_models):
            return True
        if self.allowed_providers is not None and not any(slug_matches(p, provider) for p in self.allowed_providers):
            return True
        if self.ignored_providers and any(slug_matches(p, provider) for p in self.ignored_providers):
            return True
        if self.zdr and not endpoint.zdr:
            return True
        return self.deny_data_collection and (endpoint.retains_prompts or endpoint.trains_on_prompts)


# Who may limit a caller's routing (guardrails registers itself in its AppConfig.ready: routing imports nothing
# above it). The request pipeline gets a request's limits from its pre-stages; listings ask here.
LimitSource = Callable[[Caller], tuple[RoutingLimit, ...]]
_sources: list[LimitSource] = []


def limits_register(source: LimitSource) -> None:
    if source not in _sources:
        _sources.append(source)


def limits_for(caller: object) -> tuple[RoutingLimit, ...]:
    """The limits on this caller's routing (none for anything but an inference or management key's caller)."""
    if not isinstance(caller, Caller):
        return ()
    return tuple(limit for source in _sources for limit in source(caller))


def allowed_by(limits: tuple[RoutingLimit, ...], endpoints: Sequence[EndpointInfo]) -> bool:
    """Whether some endpoint passes every limit (a model the limits leave no endpoint of is hidden)."""
    return any(not any(limit.excludes(endpoint) for limit in limits) for endpoint in endpoints)
