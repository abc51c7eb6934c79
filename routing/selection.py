"""Which endpoints a request tries, in what order: `endpoints_for_request`."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from byok.credentials import ProviderCredentials
from byok.models import SharedCapacity
from byok.selectors import ByokKeyInfo, byok_credentials, byok_key_serves, byok_keys_for_routing
from gateway.errors import GatewayError
from routing.catalog import EndpointInfo
from routing.errors import PROVIDER_NOT_CONFIGURED, ErrorType, UpstreamError
from routing.health import endpoint_stats
from routing.limits import RoutingLimit
from routing.models import ROUTER_MODELS
from routing.ordering import order_endpoints
from routing.preferences import Preferences
from routing.providers.base import GATED_PARAMETERS, SAMPLING_PARAMETERS, WIRE_PARAMETERS
from routing.providers.registry import ADAPTERS
from routing.selectors import endpoints_for_model, model_exists, provider_credentials, provider_has_credentials
from routing.snapshot import CatalogSnapshot, current_snapshot

MSG_UNKNOWN_MODEL = "Model {model} not found"
MSG_ROUTER = "{model} is a router: it chooses a chat model for /responses, /chat/completions and /messages requests"
MSG_NO_ENDPOINTS = "No endpoints available for {models}"
MSG_NO_CREDENTIALS = (
    "No provider of {models} is configured with credentials on this gateway (an operator credential, or a BYOK "
    "key of yours that applies): it cannot be served until one is added, so retrying does not help"
)
MSG_FILTERED = "No endpoint of {models} satisfies the request's routing constraints: {constraints}"
MSG_UNHONOURED = (
    "No endpoint of {models} can honour {params}: it is sent only to providers whose API takes it "
    "(and whose catalog entry lists it); choose another model or drop the field"
)
DATA_POLICIES = {"data_policy:zdr", "data_policy:training"}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One attempt the attempt engine may make: an endpoint and a reference to the credentials to call it with
    (a BYOK key id, or none for the operator's credential of the endpoint's provider). Nothing is decrypted
    while planning: `credentials()` asks byok just before the attempt."""

    endpoint: EndpointInfo
    byok_key_id: UUID | None = None
    # The catalog snapshot the plan was made from: where the operator's (sealed) credential is found without
    # another catalog read at attempt time.
    snapshot: CatalogSnapshot | None = field(default=None, repr=False, compare=False)

    @property
    def is_byok(self) -> bool:
        return self.byok_key_id is not None

    def credentials(self) -> ProviderCredentials:
        """Decrypted now, for this attempt (raises SecretsError rather than return an empty key)."""
        if self.byok_key_id is not None:
            found = byok_credentials(key_id=self.byok_key_id, model_id=self.endpoint.model_id)
        else:
            found = provider_credentials(provider_slug=self.endpoint.provider_slug, snapshot=self.snapshot)
        if found is None:  # removed since the plan was made
            raise UpstreamError(
                error_type=ErrorType.AUTHENTICATION,
                retryable=True,
                message="The credentials for this provider are no longer configured",
            )
        return found


@dataclass(frozen=True)
class RoutingCaller:
    """Who is asking, for BYOK key filters (model, API key, member) and scoping."""

    account_id: UUID
    workspace_id: UUID
    api_key_hash: str
    user_id: str | None = None

    @classmethod
    def of(cls, caller: Any) -> "RoutingCaller":
        """From an authenticated API caller (gateway.accounts.authentication.Caller, `request.user`)."""
        return cls(
            account_id=caller.account_id,
            workspace_id=caller.workspace_id,
            api_key_hash=caller.key_hash,
            user_id=caller.creator_user_id,
        )


@dataclass
class EndpointCandidates:
    """What the plan can make of one endpoint for one caller: candidates with the caller's Prioritized BYOK keys,
    with the operator's shared credential, with Fallback keys; and why it has no shared candidate."""

    prioritized: list[Candidate]
    shared: list[Candidate]
    fallback: list[Candidate]
    excluded: str | None = None  # "credentials" (no operator credential) or "byok_only" (the caller's keys forbid)

    def __bool__(self) -> bool:
        return bool(self.prioritized or self.shared or self.fallback)


class Routable:
    """Routable for this caller: the one notion the plan (endpoints_for_request), the routers
    (plugins.routers.candidates), /models' `available` flag and /models/user use: an endpoint is routable
    when a request could be sent to it now, that is with a BYOK key of the caller's workspace that applies to it
    (its filters match the model, API key and member) and serves its model, or with the operator's credential for
    its provider where the caller's Prioritized keys allow shared capacity. Only the caller's BYOK key records are
    read (once per snapshot, which a BYOK key's save replaces); nothing is decrypted."""

    def __init__(self, caller: RoutingCaller | None, *, snapshot: CatalogSnapshot | None = None):
        self.caller = caller
        self.snapshot = snapshot or current_snapshot()
        self.keys: list[ByokKeyInfo] = []
        if caller is not None:
            self.keys = self.snapshot.cached(
                ("byok", caller.account_id, caller.workspace_id),
                lambda: byok_keys_for_routing(account_id=caller.account_id, workspace_id=caller.workspace_id),
            )
        self._credentials: dict[str, bool] = {}

    def has_credentials(self, provider_slug: str) -> bool:
        """The operator's credential for the provider (shared capacity), looked up once per provider."""
        if provider_slug not in self._credentials:
            self._credentials[provider_slug] = provider_has_credentials(
                provider_slug=provider_slug, snapshot=self.snapshot
            )
        return self._credentials[provider_slug]

    def candidates(self, endpoint: EndpointInfo) -> EndpointCandidates:
        found = EndpointCandidates(prioritized=[], shared=[], fallback=[])
        caller = self.caller
        for key in self.keys:
            if (
                key.provider == endpoint.provider_slug
                and caller is not None
                and key.applies(model_id=endpoint.model_id, api_key_hash=caller.api_key_hash, user_id=caller.user_id)
                and byok_key_serves(key=key, model_id=endpoint.model_id)
            ):
                (found.fallback if key.is_fallback else found.prioritized).append(
                    Candidate(endpoint=endpoint, byok_key_id=key.id)
                )
        if not self.has_credentials(endpoint.provider_slug):
            found.excluded = "credentials"
        elif _shared_allowed(endpoint, self.keys):
            found.shared.append(Candidate(endpoint=endpoint, snapshot=self.snapshot))
        else:
            found.excluded = "byok_only"
        return found

    def __call__(self, endpoint: EndpointInfo) -> bool:
        return bool(self.candidates(endpoint))

    def model(self, model_id: str) -> bool:
        """Whether any endpoint of the model is routable (a router model has none: see the listing)."""
        return any(self(endpoint) for endpoint in endpoints_for_model(model_id=model_id, snapshot=self.snapshot))


@dataclass(frozen=True)
class RoutePlan:
    requested: str
    models: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    available: tuple[EndpointInfo, ...]
    strategy: str = "direct"
    basis: str = ""
    service_tier: str | None = None


def availability_error(
    *,
    status: int,
    code: str,
    message: str,
    models: list[str],
    excluded_by: Iterable[str] = (),
    retryable: bool = False,
) -> GatewayError:
    return GatewayError(
        message,
        status=status,
        metadata={
            "availability": {
                "code": code,
                "retryable": retryable,
                "requested_models": models,
                "excluded_by": sorted(excluded_by),
            }
        },
    )


def unservable(message: str, *, models: list[str], cause: GatewayError | None = None) -> GatewayError:
    """A model a gateway call needs (the OCR model, the guardrails' entity model, an embeddings model) that this
    deployment cannot serve: a fact of its configuration, not an outage, so 404 `no_endpoints` with
    `x-should-retry: false`, as for a model no provider has credentials for (_nothing_left), never a 503 that the
    SDKs retry to the same answer. `cause`: the plan's own refusal, whose error_type and exclusions it keeps."""
    found = (cause.metadata or {}).get("availability", {}) if cause is not None else {}
    error = availability_error(
        status=404, code="no_endpoints", models=models, message=message, excluded_by=found.get("excluded_by", ())
    )
    if cause is not None and "error_type" in (cause.metadata or {}):
        error.metadata["error_type"] = cause.metadata["error_type"]
    error.headers["x-should-retry"] = "false"
    return error


def unhonoured(endpoint: EndpointInfo, used_params: frozenset[str], *, strict: bool = False) -> frozenset[str]:
    """The request's gated parameters (stop sequences, seed, logprobs) that this endpoint cannot honour: its
    adapter's wire format does not carry them, or its catalog entry lists its parameters without them; the
    wire-only ones (a JSON schema) its adapter does not carry; and with `strict` (require_parameters) the sampling
    fields its adapter does not carry."""
    wanted, wire_only = used_params & GATED_PARAMETERS, used_params & WIRE_PARAMETERS
    sampling = used_params & SAMPLING_PARAMETERS if strict else frozenset()
    if not wanted and not wire_only and not sampling:
        return frozenset()
    adapter = ADAPTERS.get(endpoint.adapter)
    carried = adapter.parameters if adapter else frozenset()
    listed = frozenset(endpoint.supported_parameters) if endpoint.supported_parameters else GATED_PARAMETERS
    lacking = (wanted - (carried & listed)) | (wire_only - carried)
    return lacking | (sampling - (adapter.sampling if adapter else frozenset()))


def endpoints_for_request(
    *,
    models: list[str],
    estimated_input_tokens: int = 0,
    prefs: Preferences | None = None,
    used_params: frozenset[str] = frozenset(),
    sticky_endpoint_id: int | None = None,
    caller: RoutingCaller | None = None,
    snapshot: CatalogSnapshot | None = None,
    limits: Sequence[RoutingLimit] = (),
) -> RoutePlan:
    """The ordered candidates for the requested models (see routing.ordering): per model (or all together
    with `partition: none`), the caller's matching Prioritized BYOK keys, then the service's own endpoints,
    then Fallback keys. Endpoints whose context cannot hold the input are left out, and shared endpoints
    whose provider has no operator credentials or whose BYOK key forbids shared capacity, and what a caller's
    `limits` (routing.limits: a guardrail's) exclude: when they exclude everything, the limit's 403. Endpoints
    that cannot honour a stop sequence, seed or logprobs the request sets are left out, whatever
    `require_parameters` says (never accepted and dropped): when that leaves none, a 404 naming the field."""
    prefs = prefs or Preferences()
    snapshot = snapshot or current_snapshot()
    if routers := [model for model in models if model in ROUTER_MODELS]:  # plugins.routers resolves these first
        raise GatewayError(MSG_ROUTER.format(model=routers[0]), status=400, metadata={"param": "model"})
    known = [model for model in models if model_exists(model_id=model, snapshot=snapshot)]
    if not known:
        raise availability_error(
            status=404, code="model_not_found", models=models, message=MSG_UNKNOWN_MODEL.format(model=models[0])
        )
    available, groups, excluded = [], [], set()
    limited_by: list[RoutingLimit] = []
    missing: set[str] = set()  # gated parameters some endpoint could not honour
    for model in known:
        group = []
        for endpoint in endpoints_for_model(model_id=model, snapshot=snapshot):
            available.append(endpoint)
            if limited := next((limit for limit in limits if limit.excludes(endpoint)), None):
                limited_by.append(limited)
                continue
            if lacking := unhonoured(endpoint, used_params, strict=prefs.require_parameters):
                excluded.add("require_parameters")
                missing |= lacking
                continue
            if endpoint.context_length and estimated_input_tokens > endpoint.context_length:
                excluded.add("context_length")
                continue
            group.append(endpoint)
        groups.append(group)
    stats = endpoint_stats([endpoint.id for group in groups for endpoint in group])
    ordering = order_endpoints(
        groups=groups, prefs=prefs, used_params=used_params, stats=stats, sticky_endpoint_id=sticky_endpoint_id
    )
    excluded |= ordering.excluded_by
    candidates = _arrange(
        ordering.endpoints, partition=prefs.partition, routable=Routable(caller, snapshot=snapshot), excluded=excluded
    )
    if not candidates and available and len(limited_by) == len(available):
        raise _limited(limited_by, models=models)
    if not candidates:
        raise _nothing_left(
            known=known,
            models=models,
            available=available,
            excluded=excluded,
            estimated_input_tokens=estimated_input_tokens,
            missing=missing,
        )
    return RoutePlan(
        requested=models[0],
        models=tuple(known),
        candidates=candidates,
        available=tuple(available),
        basis=ordering.basis,
        service_tier=prefs.service_tier,
    )


def _arrange(
    endpoints: tuple[EndpointInfo, ...], *, partition: str, routable: Routable, excluded: set[str]
) -> tuple[Candidate, ...]:
    sections: list[list[EndpointInfo]] = []
    for endpoint in endpoints:  # one section per model, or one for all with `partition: none`
        if sections and (partition == "none" or sections[-1][0].model_id == endpoint.model_id):
            sections[-1].append(endpoint)
        else:
            sections.append([endpoint])
    candidates: list[Candidate] = []
    for section in sections:
        prioritized: list[Candidate] = []
        shared: list[Candidate] = []
        fallback: list[Candidate] = []
        for endpoint in section:
            found = routable.candidates(endpoint)
            prioritized += found.prioritized
            shared += found.shared
            fallback += found.fallback
            if found.excluded:
                excluded.add(found.excluded)
        candidates += prioritized + shared + fallback
    return tuple(candidates)


def _shared_allowed(endpoint: EndpointInfo, keys: list[ByokKeyInfo]) -> bool:
    """Rule 5, for every prioritized key of this provider: `never` forbids the provider's shared endpoints;
    `outside_filter` forbids them for the models its model filter covers (all, when it has none)."""
    for key in keys:
        if key.provider != endpoint.provider_slug or key.is_fallback:
            continue
        if key.shared_capacity == SharedCapacity.NEVER:
            return False
        if key.shared_capacity == SharedCapacity.OUTSIDE_FILTER and (
            key.allowed_models is None or endpoint.model_id in key.allowed_models
        ):
            return False
    return True


def _unhonoured_error(*, models: list[str], names: str, missing: set[str], constraints: set[str]) -> GatewayError:
    """No endpoint left, some for a gated parameter the request sets: 404 constraint_filtered naming it (`param`,
    and the availability error's `constraint`), with the other constraints that left out the rest."""
    message = MSG_UNHONOURED.format(models=names, params=", ".join(sorted(missing)))
    if others := constraints - {"require_parameters"}:
        message += f" (other endpoints were left out by: {', '.join(sorted(others))})"
    error = availability_error(
        status=404, code="constraint_filtered", models=models, excluded_by=constraints, message=message
    )
    field = sorted(missing)[0]
    error.metadata["availability"]["constraint"] = {"field": field, "detail": message}
    error.metadata["param"] = field
    return error


def _limited(limited_by: list[RoutingLimit], *, models: list[str]) -> GatewayError:
    """Every endpoint of the request was excluded by its caller's limits: refused, naming them."""
    sources = ", ".join(dict.fromkeys(limit.source for limit in limited_by))
    return GatewayError(
        f"Request blocked by {sources}: it allows no endpoint of {', '.join(models)} "
        "(its models, providers or data policy)",
        status=limited_by[0].status,
    )


def _nothing_left(
    *,
    known: list[str],
    models: list[str],
    available: list[EndpointInfo],
    excluded: set[str],
    estimated_input_tokens: int,
    missing: set[str],
) -> GatewayError:
    names = ", ".join(known)
    if not available:
        return availability_error(
            status=404, code="no_endpoints", models=models, message=MSG_NO_ENDPOINTS.format(models=names)
        )
    constraints = excluded - {"credentials", "byok_only"}
    if missing:
        return _unhonoured_error(models=models, names=names, missing=missing, constraints=constraints)
    if constraints == {"context_length"}:
        return availability_error(
            status=400,
            code="context_length_exceeded",
            models=models,
            excluded_by=constraints,
            message=f"The input (about {estimated_input_tokens} tokens) is longer than the context of every "
            f"endpoint of {names}",
        )
    if constraints:
        code = "privacy_restricted" if constraints <= DATA_POLICIES else "constraint_filtered"
        return availability_error(
            status=404,
            code=code,
            models=models,
            excluded_by=constraints,
            message=MSG_FILTERED.format(models=names, constraints=", ".join(sorted(constraints))),
        )
    # Only credentials are missing (no operator credential, no BYOK key of the caller's that applies, or its keys
    # forbid shared capacity): a state of this deployment's configuration, not a transient one, so 404
    # `no_endpoints` (the hosted API's code for a model no endpoint can serve), not 503 `temporarily_unavailable`
    # (which the SDKs retry, twice, to the same answer). Its own error_type tells it from an unknown model, and
    # `x-should-retry: false` tells the official SDKs not to retry (they obey it before any status rule).
    error = availability_error(
        status=404,
        code="no_endpoints",
        models=models,
        excluded_by=excluded & {"credentials", "byok_only"},
        message=MSG_NO_CREDENTIALS.format(models=names),
    )
    error.metadata["error_type"] = PROVIDER_NOT_CONFIGURED
    error.headers["x-should-retry"] = "false"
    return error
