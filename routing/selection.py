"""Which endpoints a request tries, in what order: `endpoints_for_request`."""

from dataclasses import dataclass, field

from byok.credentials import ProviderCredentials
from gateway.errors import GatewayError
from routing.catalog import EndpointInfo
from routing.health import endpoint_stats
from routing.ordering import order_endpoints
from routing.preferences import Preferences
from routing.selectors import endpoints_for_model, model_exists, provider_credentials
from routing.snapshot import current_snapshot

MSG_UNKNOWN_MODEL = "Model {model} not found"
MSG_NO_ENDPOINTS = "No endpoints available for {models}"
MSG_NO_CREDENTIALS = "No provider is configured with credentials for {models}"
MSG_FILTERED = "No endpoint of {models} satisfies the request's routing constraints: {constraints}"
DATA_POLICIES = {"data_policy:zdr", "data_policy:training"}


@dataclass(frozen=True)
class Candidate:
    """One attempt the fallback loop may make: an endpoint and the credentials to call it with."""

    endpoint: EndpointInfo
    credentials: ProviderCredentials = field(repr=False)

    @property
    def is_byok(self) -> bool:
        return self.credentials.is_byok


@dataclass(frozen=True)
class RoutePlan:
    requested: str
    models: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    available: tuple[EndpointInfo, ...]
    strategy: str = "direct"
    basis: str = ""
    service_tier: str | None = None


def availability_error(*, status: int, code: str, message: str, models: list[str], excluded_by=(),
                       retryable: bool = False) -> GatewayError:
    return GatewayError(message, status=status, metadata={"availability": {
        "code": code, "retryable": retryable, "requested_models": models, "excluded_by": sorted(excluded_by),
    }})


def endpoints_for_request(
    *, models: list[str], estimated_input_tokens: int = 0, prefs: Preferences | None = None,
    used_params: frozenset[str] = frozenset(), sticky_endpoint_id: int | None = None,
) -> RoutePlan:
    """The ordered candidates for the requested models (see routing.ordering). Endpoints whose context
    cannot hold the input, or whose provider has no credentials, are left out."""
    prefs = prefs or Preferences()
    snapshot = current_snapshot()
    known = [model for model in models if model_exists(model_id=model, snapshot=snapshot)]
    if not known:
        raise availability_error(status=404, code="model_not_found", models=models,
                                 message=MSG_UNKNOWN_MODEL.format(model=models[0]))
    available, groups, excluded = [], [], set()
    credentials: dict[str, ProviderCredentials | None] = {}
    for model in known:
        group = []
        for endpoint in endpoints_for_model(model_id=model, snapshot=snapshot):
            available.append(endpoint)
            if endpoint.context_length and estimated_input_tokens > endpoint.context_length:
                excluded.add("context_length")
                continue
            if endpoint.provider_slug not in credentials:
                credentials[endpoint.provider_slug] = provider_credentials(
                    provider_slug=endpoint.provider_slug, snapshot=snapshot)
            if credentials[endpoint.provider_slug] is None:
                excluded.add("credentials")
                continue
            group.append(endpoint)
        groups.append(group)
    stats = endpoint_stats([endpoint.id for group in groups for endpoint in group])
    ordering = order_endpoints(groups=groups, prefs=prefs, used_params=used_params, stats=stats,
                               sticky_endpoint_id=sticky_endpoint_id)
    excluded |= ordering.excluded_by
    if not ordering.endpoints:
        raise _nothing_left(known=known, models=models, available=available, excluded=excluded,
                            estimated_input_tokens=estimated_input_tokens)
    candidates = tuple(Candidate(endpoint=e, credentials=credentials[e.provider_slug]) for e in ordering.endpoints)
    return RoutePlan(requested=models[0], models=tuple(known), candidates=candidates, available=tuple(available),
                     basis=ordering.basis, service_tier=prefs.service_tier)


def _nothing_left(*, known, models, available, excluded, estimated_input_tokens) -> GatewayError:
    names = ", ".join(known)
    if not available:
        return availability_error(status=404, code="no_endpoints", models=models,
                                  message=MSG_NO_ENDPOINTS.format(models=names))
    constraints = excluded - {"credentials"}
    if constraints == {"context_length"}:
        return availability_error(
            status=400, code="context_length_exceeded", models=models, excluded_by=constraints,
            message=f"The input (about {estimated_input_tokens} tokens) is longer than the context of every "
                    f"endpoint of {names}")
    if constraints:
        code = "privacy_restricted" if constraints <= DATA_POLICIES else "constraint_filtered"
        return availability_error(status=404, code=code, models=models, excluded_by=constraints,
                                  message=MSG_FILTERED.format(models=names, constraints=", ".join(sorted(constraints))))
    return availability_error(status=503, code="temporarily_unavailable", models=models, retryable=True,
                              excluded_by=["credentials"], message=MSG_NO_CREDENTIALS.format(models=names))
