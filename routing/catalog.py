"""Frozen views of catalog rows that other apps (and the routing loop) work with."""

import functools
import os
import re
from dataclasses import dataclass
from decimal import Decimal

from routing.models import Endpoint, Provider


@dataclass(frozen=True)
class EndpointInfo:
    id: int
    model_id: str
    provider_slug: str
    provider_name: str
    adapter: str
    base_url: str
    upstream_model: str
    price_prompt: Decimal  # USD per million tokens
    price_completion: Decimal
    price_cached_input: Decimal | None
    price_cache_write: Decimal | None
    price_reasoning: Decimal | None
    price_request: Decimal
    context_length: int
    max_completion_tokens: int | None
    quantization: str
    supported_parameters: tuple[str, ...]
    service_tiers: tuple[str, ...]
    zdr: bool
    retains_prompts: bool
    trains_on_prompts: bool
    region: str
    allow_private_network: bool
    is_local_standin: bool
    model_kind: str = "chat"  # routing.models.ModelKind: which API routes to the endpoint
    hosted_tools: tuple[str, ...] = ()  # the tools the provider runs itself here (routing.providers.hosted)
    price_web_search: Decimal = Decimal(0)  # USD per search the provider runs itself


@functools.lru_cache(maxsize=4096)  # asked per endpoint on every request's routing; slugs are few
def env_name(slug: str, suffix: str) -> str:
    """GATEWAY_PROVIDER_<SLUG>_<SUFFIX>, e.g. GATEWAY_PROVIDER_GOOGLE_VERTEX_US_EAST5_BASE_URL."""
    return f"GATEWAY_PROVIDER_{re.sub(r'[^A-Z0-9]+', '_', slug.upper()).strip('_')}_{suffix}"


def provider_base_url(provider: Provider) -> str:
    return os.environ.get(env_name(provider.slug, "BASE_URL")) or provider.base_url


def endpoint_info(endpoint: Endpoint) -> EndpointInfo:
    provider = endpoint.provider
    return EndpointInfo(
        id=endpoint.id,
        model_id=endpoint.model_id,
        provider_slug=provider.slug,
        provider_name=provider.name,
        adapter=provider.adapter,
        base_url=provider_base_url(provider).rstrip("/"),
        upstream_model=endpoint.upstream_model,
        price_prompt=endpoint.price_prompt,
        price_completion=endpoint.price_completion,
        price_cached_input=endpoint.price_cached_input,
        price_cache_write=endpoint.price_cache_write,
        price_reasoning=endpoint.price_reasoning,
        price_request=endpoint.price_request,
        context_length=endpoint.context_length,
        max_completion_tokens=endpoint.max_completion_tokens,
        quantization=endpoint.quantization,
        supported_parameters=tuple(endpoint.supported_parameters or ()),
        service_tiers=tuple(endpoint.service_tiers or ()),
        zdr=provider.zdr,
        retains_prompts=provider.retains_prompts,
        trains_on_prompts=provider.trains_on_prompts,
        region=provider.region,
        allow_private_network=provider.allow_private_network,
        is_local_standin=provider.is_local_standin,
        model_kind=endpoint.model.kind,
        hosted_tools=tuple(endpoint.hosted_tools or ()),
        price_web_search=endpoint.price_web_search,
    )
