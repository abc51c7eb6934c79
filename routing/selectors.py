"""Catalog reads."""

import os
from collections.abc import Sequence
from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from byok.credentials import ProviderCredentials
from byok.selectors import operator_credentials
from routing.catalog import EndpointInfo, env_name
from routing.models import Endpoint, Model, ModelKind, Provider, ProviderStatus
from routing.snapshot import CatalogSnapshot, current_snapshot


def routable_endpoints() -> QuerySet[Endpoint]:
    return Endpoint.objects.filter(enabled=True, provider__status=ProviderStatus.ACTIVE).select_related(
        "provider", "model"
    )


def endpoints_for_model(*, model_id: str, snapshot: CatalogSnapshot | None = None) -> list[EndpointInfo]:
    """The model's enabled endpoints on active providers, cheapest first."""
    return list((snapshot or current_snapshot()).endpoints_by_model.get(model_id, ()))


def model_exists(*, model_id: str, snapshot: CatalogSnapshot | None = None) -> bool:
    return model_id in (snapshot or current_snapshot()).models


def provider_has_credentials(*, provider_slug: str, snapshot: CatalogSnapshot | None = None) -> bool:
    """Whether `provider_credentials` has something to return (nothing is decrypted to know)."""
    if os.environ.get(env_name(provider_slug, "API_KEY")):
        return True
    secret = (snapshot or current_snapshot()).secrets.get(provider_slug)
    return secret is not None and bool(secret.sealed or (secret.env_var and os.environ.get(secret.env_var)))


def provider_credentials(*, provider_slug: str, snapshot: CatalogSnapshot | None = None) -> ProviderCredentials | None:
    """The operator's credential for shared capacity: env override, sealed value (decrypted by byok, per call;
    the plaintext is not kept), or the named env var."""
    override = os.environ.get(env_name(provider_slug, "API_KEY"))
    if override:
        return ProviderCredentials(api_key=override)
    secret = (snapshot or current_snapshot()).secrets.get(provider_slug)
    if secret is None:
        return None
    if secret.sealed:
        return operator_credentials(provider_id=secret.provider_id, key_id=secret.key_id, sealed=secret.sealed)
    if secret.env_var and os.environ.get(secret.env_var):
        return ProviderCredentials(api_key=os.environ[secret.env_var])
    return None


def chat_model_quality() -> QuerySet[Model, tuple[str, Any, float | None, int, Any]]:
    """Every chat model's (id, task_scores, coding_score, context_length, input_modalities): what the routers
    (plugins/routers/candidates.py) rank by."""
    return Model.objects.filter(kind=ModelKind.CHAT).values_list(
        "id", "task_scores", "coding_score", "context_length", "input_modalities"
    )


def models_list(
    *,
    q: str = "",
    supported_parameters: Sequence[str] = (),
    input_modalities: Sequence[str] = (),
    output_modalities: Sequence[str] = (),
    providers: Sequence[str] = (),
) -> list[Model]:
    endpoints = routable_endpoints().order_by("price_prompt", "price_completion", "id")
    models = (
        Model.objects.filter(Q(endpoints__in=routable_endpoints()) | Q(kind=ModelKind.ROUTER))  # routers: no endpoint
        .distinct()
        .prefetch_related(Prefetch("endpoints", queryset=endpoints, to_attr="live_endpoints"))
    )
    if q:
        models = models.filter(Q(id__icontains=q) | Q(name__icontains=q) | Q(description__icontains=q))
    if providers:
        models = models.filter(endpoints__provider__slug__in=providers)
    result = list(models.order_by("-created", "id"))

    # JSON list containment is not portable across SQLite and PostgreSQL: filter these in Python.
    def has_all(values: list[str] | None, wanted: Sequence[str]) -> bool:
        return all(item in (values or []) for item in wanted)

    return [
        model
        for model in result
        if has_all(model.supported_parameters, supported_parameters)
        and has_all(model.input_modalities, input_modalities)
        and has_all(model.output_modalities, output_modalities)
    ]


def model_get(*, model_id: str) -> Model | None:
    endpoints = routable_endpoints().order_by("price_prompt", "price_completion", "id")
    return (
        Model.objects.filter(pk=model_id)
        .prefetch_related(Prefetch("endpoints", queryset=endpoints, to_attr="live_endpoints"))
        .first()
    )


def providers_list() -> QuerySet[Provider]:
    return Provider.objects.filter(status=ProviderStatus.ACTIVE).order_by("slug")


def cheapest(endpoints: list[Endpoint]) -> Endpoint | None:
    return min(endpoints, key=lambda e: (e.price_prompt + e.price_completion, e.id), default=None)


def provider_credential_kind(*, provider_slug: str) -> str | None:
    """The credential shape of a known provider, or None when there is no such provider."""
    return Provider.objects.filter(slug=provider_slug).values_list("credential_kind", flat=True).first()
