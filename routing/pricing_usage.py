"""A provider's reported usage checked against what the request allows (pure functions): billed as reported while
plausible, clamped to what the hold assumed when not, estimated from the text when missing. The caller keeps the
reasons (the generation record's usage_anomaly) and logs them."""

import math
from dataclasses import dataclass, replace
from typing import Any

from routing.canonical import CanonicalRequest, CanonicalResponse, FilePart, Message, OutputHostedTool, Usage
from routing.catalog import EndpointInfo
from routing.output_bound import output_allowance
from routing.providers.base import as_mapping
from routing.providers.hosted import searches_bound

# Reported usage is billed as reported while plausible: output tokens at most what the request allows
# (routing.output_bound.output_allowance: its maximum plus a thinking budget some adapters add) plus this margin,
# input tokens at most the input estimate times this factor plus this slack (a tokenizer can count 2 tokens per
# character; images, documents and the provider's own tool prompts are estimated roughly). Beyond that the usage
# is clamped to what the hold assumed.
USAGE_OUTPUT_MARGIN = 64
USAGE_INPUT_FACTOR = 8
USAGE_INPUT_SLACK = 4096
UNKNOWN_CONTEXT_TOKENS = 2_000_000  # the input bound for documents by URL on an endpoint of unknown context
USAGE_FIELDS = (
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "web_search_requests",
)
MSG_FAR_LONGER = "output text far longer than the reported output_tokens"


@dataclass(frozen=True)
class UsageBounds:
    input_tokens: int  # the most input tokens that are plausible for the request
    output_tokens: int  # the most output tokens that are plausible
    held_input_tokens: int  # what the credit hold assumed
    held_output_tokens: int
    web_searches: int = 0  # the most provider-run web searches the request may make (and the hold covers)


def usage_bounds(*, request: CanonicalRequest, estimated_input_tokens: int, endpoint: EndpointInfo) -> UsageBounds:
    referenced = _has_referenced_documents(request)  # a document by URL or file id: any size up to the context
    allowed = output_allowance(request, endpoint)  # as the output bound and the hold
    web_searches = searches_bound(request.hosted_tools)
    estimated = estimated_input_tokens
    plausible_input = estimated * USAGE_INPUT_FACTOR + USAGE_INPUT_SLACK
    if referenced:
        plausible_input = max(plausible_input, endpoint.context_length or UNKNOWN_CONTEXT_TOKENS)
    elif endpoint.context_length:
        plausible_input = min(plausible_input, max(endpoint.context_length, estimated) + USAGE_INPUT_SLACK)
    return UsageBounds(
        input_tokens=plausible_input,
        output_tokens=allowed.tokens + USAGE_OUTPUT_MARGIN,
        held_input_tokens=estimated,
        held_output_tokens=allowed.held,
        web_searches=web_searches,
    )


def checked_usage(response: CanonicalResponse, bounds: UsageBounds) -> tuple[Usage, list[str]]:
    """(the usage to bill, why it differs from the reported one: empty when it does not). Clamped when implausible
    (negatives to 0, counts above the request's limits to what the hold assumed); output with no output tokens
    reported is estimated from its text, so it is never free."""
    bounded, reasons = clamp_usage(reported_usage(response), bounds)
    if response.output_cut and bounded.output_tokens < bounds.held_output_tokens:
        # The gateway cut it at its output bound (routing.output_bound): it wrote at least the tokens allowed,
        # which the hold covers (with a reasoning request's thinking budget).
        reasons += [MSG_FAR_LONGER, "output cut at the request's output bound"]
        input_tokens = bounded.input_tokens or bounds.held_input_tokens  # (a cut stream's came later)
        bounded = replace(bounded, output_tokens=bounds.held_output_tokens, input_tokens=input_tokens)
    elif bounded.output_tokens <= 0:
        estimated = usage_or_estimate(replace(response, usage=bounded), estimated_input=bounds.held_input_tokens)
        if estimated is not bounded:
            reasons.append("output_tokens not reported: estimated from the text generated")
            bounded, more = clamp_usage(estimated, bounds)
            reasons += more
    elif bounded.output_tokens < bounds.held_output_tokens and _text_tokens(response) > 2 * bounds.output_tokens:
        # Far more text than the request allowed, reported as little: billed as the most the request allowed.
        reasons.append(MSG_FAR_LONGER)
        bounded = replace(bounded, output_tokens=bounds.held_output_tokens)
    return bounded, reasons


def reported_usage(response: CanonicalResponse) -> Usage:
    """The usage the provider reported, with the web searches its answer shows when it counts fewer."""
    usage = response.usage
    if (seen := searches_seen(response)) > usage.web_search_requests:  # a stream cut before its usage came
        usage = replace(usage, web_search_requests=seen)
    return usage


def usage_anomaly(
    *, response: CanonicalResponse, billed: Usage, bounds: UsageBounds, reasons: list[str], provider: str
) -> dict[str, Any]:
    """What the generation record keeps of an implausible usage."""
    reported = reported_usage(response)
    return {
        "reasons": reasons,
        "provider": provider,
        "reported": {name: _reported(getattr(reported, name, None)) for name in USAGE_FIELDS},
        "plausible_max": {"input_tokens": bounds.input_tokens, "output_tokens": bounds.output_tokens},
        "billed": {name: getattr(billed, name) for name in USAGE_FIELDS},
    }


def _has_referenced_documents(request: CanonicalRequest) -> bool:
    return any(
        isinstance(part, FilePart) and not part.file_data
        for item in request.input
        if isinstance(item, Message)
        for part in item.content
    )


def clamp_usage(usage: Usage, bounds: UsageBounds) -> tuple[Usage, list[str]]:
    """(the usage to bill and show, why it differs from the reported one: empty when it does not)."""
    reasons = []
    counts = {}
    for name in USAGE_FIELDS:
        value = getattr(usage, name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            reasons.append(f"{name} is not a number")
            value = 0
        elif value < 0:
            reasons.append(f"negative {name}")
            value = 0
        counts[name] = int(value)
    if counts["input_tokens"] > bounds.input_tokens:
        reasons.append(f"input_tokens above the plausible {bounds.input_tokens}")
        counts["input_tokens"] = bounds.held_input_tokens
    if counts["output_tokens"] > bounds.output_tokens:
        reasons.append(f"output_tokens above the plausible {bounds.output_tokens}")
        counts["output_tokens"] = bounds.held_output_tokens
    if counts["web_search_requests"] > bounds.web_searches:  # more searches than the provider was allowed
        reasons.append(f"web_search_requests above the {bounds.web_searches} the request allowed")
        counts["web_search_requests"] = bounds.web_searches
    for part, whole, limit in (
        ("cached_tokens", "input_tokens", counts["input_tokens"]),
        ("cache_write_tokens", "input_tokens", counts["input_tokens"] - counts["cached_tokens"]),
        ("reasoning_tokens", "output_tokens", counts["output_tokens"]),
    ):
        if counts[part] > limit:
            if not any(part in reason for reason in reasons):
                reasons.append(f"{part} above {whole}")
            counts[part] = max(0, limit)
    if not reasons:
        return usage, []
    return Usage(**counts), reasons


def _reported(value: object) -> object:
    """A reported count as it can be stored (JSON): the integer, or a short text for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return repr(value)[:40]


def _generated_chars(response: CanonicalResponse) -> int:
    generated = sum(len(getattr(item, "text", "") or getattr(item, "arguments", "") or "") for item in response.output)
    return generated + sum(
        len(text) for item in response.output for text in getattr(item, "summary", ()) + getattr(item, "content", ())
    )


def _text_tokens(response: CanonicalResponse) -> int:
    """A low estimate of the tokens in the generated text (4 characters a token; fewer for most other scripts)."""
    return _generated_chars(response) // 4


def usage_or_estimate(response: CanonicalResponse, *, estimated_input: int) -> Usage:
    """The upstream's usage when it reported one; otherwise an estimate from the text generated so far."""
    if response.usage.output_tokens > 0:
        return response.usage
    generated = _generated_chars(response)
    if not generated:
        return response.usage
    return replace(
        response.usage,
        output_tokens=max(1, generated // 4),
        input_tokens=response.usage.input_tokens or estimated_input,
    )


def searches_seen(response: CanonicalResponse) -> int:
    """The provider's web searches its answer shows (its web_search_call items that searched): billed when the
    usage it reports counts fewer, or came not at all (a stream cut short, a client that left)."""
    return sum(
        1
        for item in response.output
        if isinstance(item, OutputHostedTool)
        and item.item.get("type") == "web_search_call"
        and as_mapping(item.item.get("action")).get("type", "search") == "search"
    )


def usage_add(*usages: Usage) -> Usage:
    """The usages' counts added up."""
    return Usage(**{name: sum(getattr(usage, name) for usage in usages) for name in USAGE_FIELDS})
