"""The plugins' own model calls (a fusion panel and its analysis, the auto-router's classifier, Llama Guard): their
reported usage bounded as the request's own is (responses_api.service.clamp_usage), so that a provider reporting a
billion tokens cannot have the caller's whole balance."""

from collections.abc import Callable

from routing.canonical import CanonicalRequest, CanonicalResponse, Usage
from routing.catalog import EndpointInfo
from routing.providers.anthropic.request import EFFORT_BUDGET
from routing.selection import Candidate

DEFAULT_OUTPUT_TOKENS = 4096  # a call's output bound when it sets no max_output_tokens
USAGE_MARGIN = 64  # output tokens a call may report beyond its limit (as responses_api.service allows)
UNKNOWN_CONTEXT_TOKENS = 2_000_000  # the input bound on an endpoint of unknown context
COUNTS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


def bounded_usage(usage: Usage, request: CanonicalRequest, endpoint: EndpointInfo) -> Usage:
    """A plugin call's reported usage as billed: counts that are no non-negative integers are 0, the
    output at most the call's limit (and a thinking budget; the margin the request's own bounds allow), the input at
    most the endpoint's context, parts at most their whole; no provider-run searches (none were sent). A provider
    reporting a billion tokens would otherwise have the caller's whole balance."""
    counts = {name: value if type(value := getattr(usage, name, 0)) is int and value >= 0 else 0 for name in COUNTS}
    output = min(request.max_output_tokens or DEFAULT_OUTPUT_TOKENS, endpoint.max_completion_tokens or 1 << 62)
    if request.reasoning is not None and request.reasoning.enabled is not False:
        output += max(request.reasoning.max_tokens or 0, max(EFFORT_BUDGET.values()))
    counts["output_tokens"] = min(counts["output_tokens"], output + USAGE_MARGIN)
    counts["input_tokens"] = min(counts["input_tokens"], endpoint.context_length or UNKNOWN_CONTEXT_TOKENS)
    counts["cached_tokens"] = min(counts["cached_tokens"], counts["input_tokens"])
    counts["cache_write_tokens"] = min(counts["cache_write_tokens"], counts["input_tokens"] - counts["cached_tokens"])
    counts["reasoning_tokens"] = min(counts["reasoning_tokens"], counts["output_tokens"])
    return Usage(**counts)


def bound_for(request: CanonicalRequest) -> Callable[[CanonicalResponse, Candidate], Usage]:
    """The attempt engine's `bound_usage` for a call of `request`."""
    return lambda response, candidate: bounded_usage(response.usage, request, candidate.endpoint)
