"""The caller's guardrails (the key's, the member's, else the workspace default: guardrails.selectors) and what
they set apart from content: routing limits (allowed and ignored models and providers, ZDR, data collection) and
spend caps (budget guardrails)."""

from __future__ import annotations

from gateway.accounts.authentication import Caller
from gateway.billing.services import SpendCap
from guardrails.selectors import GuardrailRule, guardrail_generations, guardrails_for_caller, period_bounds
from routing.limits import RoutingLimit


def caller_limits(caller: Caller) -> tuple[RoutingLimit, ...]:
    """The routing limits of a caller's guardrails (for listings: routing.limits asks here)."""
    return routing_limits(caller_rules(caller))


def caller_rules(caller: Caller) -> list[GuardrailRule]:
    return guardrails_for_caller(
        account_id=caller.account_id,
        workspace_id=caller.workspace_id,
        key_hash=caller.key_hash,
        user_id=caller.creator_user_id,
    )


def routing_limits(rules: list[GuardrailRule]) -> tuple[RoutingLimit, ...]:
    return tuple(limit for rule in rules if (limit := _limit(rule)))


def spend_caps(rules: list[GuardrailRule], caller: Caller) -> tuple[SpendCap, ...]:
    """Each budget guardrail's cap: a key's guardrail on the key's spend, a member's on every key the member
    created, the workspace default on the spend under it across the workspace (what its record shows); each
    checked on its own, so the lowest remaining wins."""
    caps = []
    for rule in rules:
        if rule.limit_usd is None:
            continue
        since, resets_at = period_bounds(rule.reset_interval)
        pooled = rule.scope == "workspace"
        caps.append(
            SpendCap(
                source=f"guardrail {rule.name}",
                limit=rule.limit_usd,
                since=since,
                resets_at=resets_at,
                include_byok=rule.include_byok_in_budgets,
                member_user_id=caller.creator_user_id if rule.scope == "member" else None,
                pool=guardrail_generations(
                    guardrail_id=rule.id, workspace_id=rule.workspace_id, is_workspace_default=True
                )
                if pooled
                else None,
                pool_workspace_id=rule.workspace_id if pooled else None,
            )
        )
    return tuple(caps)


def _limit(rule: GuardrailRule) -> RoutingLimit | None:
    limit = RoutingLimit(
        source=f"guardrail {rule.name}",
        allowed_models=rule.allowed_models,
        ignored_models=rule.ignored_models,
        allowed_providers=rule.allowed_providers,
        ignored_providers=rule.ignored_providers,
        zdr=rule.enforce_zdr,
        deny_data_collection=rule.data_collection == "deny",
    )
    return limit if limit != RoutingLimit(source=limit.source) else None
