"""Prices: catalog rows hold USD per million tokens; the API shows USD per token as strings."""

from decimal import Decimal

from routing.canonical import Usage
from routing.catalog import EndpointInfo

MILLION = Decimal(1_000_000)


def per_token(per_million: Decimal | None) -> str:
    if per_million is None:
        return "0"
    value = (Decimal(per_million) / MILLION).normalize()
    return format(value, "f")


def usage_cost(*, endpoint: EndpointInfo, usage: Usage) -> Decimal:
    """List-price cost of one served request (input + output + the per-request price + the provider's own web
    searches)."""
    input_cost, output_cost = usage_cost_split(endpoint=endpoint, usage=usage)
    return input_cost + output_cost + endpoint.price_request + usage.web_search_requests * endpoint.price_web_search


def usage_cost_split(*, endpoint: EndpointInfo, usage: Usage) -> tuple[Decimal, Decimal]:
    """(input cost, output cost). Cached input is billed at the cached price when there is one;
    reasoning tokens are part of output tokens and billed at the reasoning price when set."""
    cached = min(usage.cached_tokens, usage.input_tokens)
    cache_write = min(usage.cache_write_tokens, usage.input_tokens - cached)
    fresh_input = usage.input_tokens - cached - cache_write
    reasoning = min(usage.reasoning_tokens, usage.output_tokens)
    plain_output = usage.output_tokens - reasoning
    cached_price = endpoint.price_cached_input if endpoint.price_cached_input is not None else endpoint.price_prompt
    write_price = endpoint.price_cache_write if endpoint.price_cache_write is not None else endpoint.price_prompt
    reasoning_price = endpoint.price_reasoning if endpoint.price_reasoning is not None else endpoint.price_completion
    input_cost = (fresh_input * endpoint.price_prompt + cached * cached_price + cache_write * write_price) / MILLION
    output_cost = (plain_output * endpoint.price_completion + reasoning * reasoning_price) / MILLION
    return input_cost, output_cost


def max_cost(*, endpoint: EndpointInfo, input_tokens: int, max_output_tokens: int) -> Decimal:
    """The most a request can cost on this endpoint: what a credit reservation must cover."""
    output_price = max(endpoint.price_completion, endpoint.price_reasoning or Decimal(0))
    return (input_tokens * endpoint.price_prompt + max_output_tokens * output_price) / MILLION + endpoint.price_request
