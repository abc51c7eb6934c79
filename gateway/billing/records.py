"""The generation record of a request, built from what the request path knows at its settlement (the outcome, the
endpoint that served, the usage billed, what the stages recorded): billing.services.generation_settle writes it.
Types from the layers above are taken by their shape (Protocols), since billing imports none of them."""

import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

from gateway.accounts.authentication import Caller
from gateway.billing.generations import AttemptRecord, GenerationRecord


class UsageCounts(Protocol):
    """A usage as routing.canonical.Usage has it."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...


class ServedEndpoint(Protocol):
    """The endpoint that served, as routing.catalog.EndpointInfo has it."""

    @property
    def id(self) -> int: ...
    @property
    def model_id(self) -> str: ...
    @property
    def provider_slug(self) -> str: ...


def generation_record(
    *,
    generation_id: str,
    caller: Caller,
    session_id: str,
    requested_model: str,
    status: str,
    endpoint: ServedEndpoint | None,
    is_byok: bool,
    usage: UsageCounts,
    cost: Decimal,
    upstream_cost: Decimal,
    finish_reason: str,
    error_type: str,
    upstream_id: str | None,
    streamed: bool,
    cancelled: bool,
    started: float,
    ttft_ms: int | None,
    service_tier: str,
    attempts: Sequence[AttemptRecord],
    usage_anomaly: dict[str, Any] | None,
    guardrail_flags: list[dict[str, Any]] | None,
    stage_record: dict[str, Any],
) -> GenerationRecord:
    """The record of a request that reached its attempts. `started`: time.monotonic() when it began (latency);
    `stage_record`: the stages' figures (moderation_latency, plugins, router)."""
    latency = int((time.monotonic() - started) * 1000)
    return GenerationRecord(
        id=generation_id,
        account_id=caller.account_id,
        api_key_id=caller.key_id,
        workspace_id=caller.workspace_id,
        requested_model=requested_model,
        model=endpoint.model_id if endpoint else "",
        provider=endpoint.provider_slug if endpoint else "",
        endpoint_id=endpoint.id if endpoint else None,
        upstream_id=upstream_id or "",
        status=status,
        finish_reason=finish_reason,
        error_type=error_type,
        tokens_input=usage.input_tokens,
        tokens_cached=usage.cached_tokens,
        tokens_cache_write=usage.cache_write_tokens,
        tokens_output=usage.output_tokens,
        tokens_reasoning=usage.reasoning_tokens,
        cost=cost,
        upstream_cost=upstream_cost,
        is_byok=is_byok,
        streamed=streamed,
        cancelled=cancelled,
        latency_ms=latency,
        ttft_ms=ttft_ms,
        generation_time_ms=latency - ttft_ms if ttft_ms is not None else None,
        session_id=session_id,
        service_tier=service_tier,
        provider_responses=tuple(attempts),
        usage_anomaly=usage_anomaly,
        guardrail_flags=guardrail_flags,
        moderation_latency=stage_record.get("moderation_latency"),
        plugins=stage_record.get("plugins") or None,
        router=stage_record.get("router"),
    )


def blocked_record(
    *,
    generation_id: str,
    caller: Caller,
    session_id: str,
    requested_model: str,
    cost: Decimal,
    streamed: bool,
    stage_record: dict[str, Any],
) -> GenerationRecord:
    """The record of a request refused after paid checks ran (a failed generation, error_type `blocked`)."""
    return GenerationRecord(
        id=generation_id,
        account_id=caller.account_id,
        api_key_id=caller.key_id,
        workspace_id=caller.workspace_id,
        requested_model=requested_model,
        status="failed",
        error_type="blocked",
        cost=cost,
        streamed=streamed,
        session_id=session_id,
        moderation_latency=stage_record.get("moderation_latency"),
        plugins=stage_record.get("plugins") or None,
    )
