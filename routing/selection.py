"""Which endpoints a request tries, in what order: `endpoints_for_request`."""

from dataclasses import dataclass, field

from byok.credentials import ProviderCredentials
from gateway.errors import GatewayError
from routing.catalog import EndpointInfo
from routing.selectors import endpoints_for_model, model_exists, provider_credentials
from routing.snapshot import current_snapshot

MSG_UNKNOWN_MODEL = "Model {model} not found"
MSG_NO_ENDPOINTS = "No endpoints available for {models}"
MSG_NO_CREDENTIALS = "No provider is configured with credentials for {models}"


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


def availability_error(*, status: int, code: str, message: str, models: list[str], excluded_by=(),
                       retryable: bool = False) -> GatewayError:
    return GatewayError(message, status=status, metadata={"availability": {
        "code": code, "retryable": retryable, "requested_models": models, "excluded_by": list(excluded_by),
    }})


def endpoints_for_request(*, models: list[str], estimated_input_tokens: int = 0) -> RoutePlan:
    """Candidates for the requested models, model by model, each model's endpoints cheapest first.
    Endpoints whose context cannot hold the input, or whose provider has no credentials, are skipped."""
    snapshot = current_snapshot()
    known = [model for model in models if model_exists(model_id=model, snapshot=snapshot)]
    if not known:
        raise availability_error(status=404, code="model_not_found", message=MSG_UNKNOWN_MODEL.format(
            model=models[0]), models=models)
    available, candidates, excluded = [], [], set()
    credentials_cache: dict[str, ProviderCredentials | None] = {}
    for model in known:
        for endpoint in endpoints_for_model(model_id=model, snapshot=snapshot):
            available.append(endpoint)
            if endpoint.context_length and estimated_input_tokens > endpoint.context_length:
                excluded.add("context_length")
                continue
            if endpoint.provider_slug not in credentials_cache:
                credentials_cache[endpoint.provider_slug] = provider_credentials(
                    provider_slug=endpoint.provider_slug, snapshot=snapshot)
            credentials = credentials_cache[endpoint.provider_slug]
            if credentials is None:
                excluded.add("credentials")
                continue
            candidates.append(Candidate(endpoint=endpoint, credentials=credentials))
    if not candidates:
        if "context_length" in excluded and not any(e.context_length >= estimated_input_tokens for e in available):
            raise availability_error(
                status=400, code="context_length_exceeded", models=models, excluded_by=["context_length"],
                message=f"The input (about {estimated_input_tokens} tokens) is longer than the context of every "
                        f"endpoint of {', '.join(known)}",
            )
        if not available:
            raise availability_error(status=404, code="no_endpoints", models=models,
                                     message=MSG_NO_ENDPOINTS.format(models=", ".join(known)))
        raise availability_error(status=503, code="temporarily_unavailable", models=models, retryable=True,
                                 excluded_by=sorted(excluded),
                                 message=MSG_NO_CREDENTIALS.format(models=", ".join(known)))
    return RoutePlan(requested=models[0], models=tuple(known), candidates=tuple(candidates),
                     available=tuple(available))
