"""Guardrail reads: the API's records and listings, the current-period spend a record shows, and the rules
that apply to a caller (`guardrails_for_caller`), served from an in-process cache that every change drops
within CACHE_VERSION_CHECK_SECONDS in every process (the "guardrails" version counter)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db.models import Case, DecimalField, F, Model, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from gateway.billing.models import Generation
from gateway.billing.selectors import window_starts
from gateway.errors import NotFound
from gateway.versions.counters import VersionedCache, version_bump
from guardrails.models import Guardrail, GuardrailKeyAssignment, GuardrailMemberAssignment

VERSION = "guardrails"
MAX_CACHED_CALLERS = 4096  # (account, workspace, key, member) combinations kept per process
MSG_GUARDRAIL_NOT_FOUND = "Guardrail not found"
ZERO = Decimal(0)
_MONEY = DecimalField(max_digits=24, decimal_places=12)


@dataclass(frozen=True, slots=True)
class ContentFilter:
    pattern: str
    action: str
    label: str | None


@dataclass(frozen=True, slots=True)
class BuiltinFilter:
    slug: str
    action: str


@dataclass(frozen=True, slots=True)
class GuardrailRule:
    """One guardrail as it applies to a caller. `scope` says why it applies: `key` (assigned to the caller's
    key), `member` (to the member who created the key) or `workspace` (the default, when neither has one).
    The same guardrail may come twice, as `key` and as `member`: each assignee has its own budget."""

    id: UUID
    name: str
    scope: str
    workspace_id: UUID
    limit_usd: Decimal | None
    reset_interval: str | None
    include_byok_in_budgets: bool
    allowed_models: tuple[str, ...] | None
    ignored_models: tuple[str, ...] | None
    allowed_providers: tuple[str, ...] | None
    ignored_providers: tuple[str, ...] | None
    enforce_zdr: bool
    data_collection: str
    content_filters: tuple[ContentFilter, ...]
    content_filter_builtins: tuple[BuiltinFilter, ...]

    def policy_inputs(self) -> tuple[list[dict[str, str | None]], list[dict[str, str]]]:
        """The filters in the shape `guardrails.policy.policy_for(filters, builtins)` takes."""
        filters = [{"pattern": f.pattern, "action": f.action, "label": f.label} for f in self.content_filters]
        return filters, [{"slug": b.slug, "action": b.action} for b in self.content_filter_builtins]


CallerKey = tuple[UUID, UUID, str, str | None]
_rules: VersionedCache[CallerKey, tuple[GuardrailRule, ...]] = VersionedCache(VERSION, max_entries=MAX_CACHED_CALLERS)


def guardrails_for_caller(
    *, account_id: UUID, workspace_id: UUID, key_hash: str, user_id: str | None
) -> list[GuardrailRule]:
    """The key's guardrail and the member's (each when assigned), else the workspace default; [] when none.
    No query in the steady state."""
    rules = _rules.get_or_load((account_id, workspace_id, key_hash, user_id), _load_rules)
    return list(rules or ())


def _load_rules(caller: CallerKey) -> tuple[GuardrailRule, ...]:
    account_id, workspace_id, key_hash, user_id = caller
    rules = []
    by_key = GuardrailKeyAssignment.objects.select_related("guardrail").filter(
        api_key__hash=key_hash, guardrail__account_id=account_id
    )
    rules += [guardrail_rule(row.guardrail, scope="key") for row in by_key]
    if user_id is not None:
        by_member = GuardrailMemberAssignment.objects.select_related("guardrail").filter(
            member__account_id=account_id, member__user_id=user_id, guardrail__account_id=account_id
        )
        rules += [guardrail_rule(row.guardrail, scope="member") for row in by_member]
    if not rules:
        default = Guardrail.objects.filter(
            account_id=account_id, workspace_id=workspace_id, is_workspace_default=True
        ).first()
        rules += [guardrail_rule(default, scope="workspace")] if default is not None else []
    return tuple(rules)


def guardrail_rule(guardrail: Guardrail, *, scope: str) -> GuardrailRule:
    return GuardrailRule(
        id=guardrail.id,
        name=guardrail.name,
        scope=scope,
        workspace_id=guardrail.workspace_id,
        limit_usd=guardrail.limit_usd,
        reset_interval=guardrail.reset_interval,
        include_byok_in_budgets=guardrail.include_byok_in_budgets,
        allowed_models=_tuple(guardrail.allowed_models),
        ignored_models=_tuple(guardrail.ignored_models),
        allowed_providers=_tuple(guardrail.allowed_providers),
        ignored_providers=_tuple(guardrail.ignored_providers),
        enforce_zdr=guardrail.enforce_zdr,
        data_collection=guardrail.data_collection,
        content_filters=tuple(
            ContentFilter(pattern=f["pattern"], action=f["action"], label=f.get("label"))
            for f in guardrail.content_filters
        ),
        content_filter_builtins=tuple(
            BuiltinFilter(slug=b["slug"], action=b["action"]) for b in guardrail.content_filter_builtins
        ),
    )


def _tuple(value: list[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@receiver([post_save, post_delete], sender=Guardrail)
@receiver([post_save, post_delete], sender=GuardrailKeyAssignment)
@receiver([post_save, post_delete], sender=GuardrailMemberAssignment)
def _bump_version(sender: type[Model], **kwargs: Any) -> None:
    """Saves and deletes, including the cascades from a deleted key, member, workspace or account."""
    version_bump(VERSION)


# ---- the management API's reads ------------------------------------------------------------------------


def guardrails_list(*, account_id: UUID, workspace_id: UUID | None = None) -> QuerySet[Guardrail]:
    guardrails = Guardrail.objects.filter(account_id=account_id).order_by("created_at", "id")
    if workspace_id is not None:
        guardrails = guardrails.filter(workspace_id=workspace_id)
    return guardrails


def guardrail_get(*, account_id: UUID, guardrail_id: UUID) -> Guardrail:
    """A guardrail of this account; another account's is simply not found."""
    guardrail = Guardrail.objects.filter(account_id=account_id, pk=guardrail_id).first()
    if guardrail is None:
        raise NotFound(MSG_GUARDRAIL_NOT_FOUND)
    return guardrail


def key_assignments_list(*, account_id: UUID, guardrail_id: UUID | None = None) -> QuerySet[GuardrailKeyAssignment]:
    rows = GuardrailKeyAssignment.objects.filter(guardrail__account_id=account_id).select_related("api_key")
    if guardrail_id is not None:
        rows = rows.filter(guardrail_id=guardrail_id)
    return rows.order_by("created_at", "id")


def member_assignments_list(
    *, account_id: UUID, guardrail_id: UUID | None = None
) -> QuerySet[GuardrailMemberAssignment]:
    rows = GuardrailMemberAssignment.objects.filter(guardrail__account_id=account_id).select_related("member")
    if guardrail_id is not None:
        rows = rows.filter(guardrail_id=guardrail_id)
    return rows.order_by("created_at", "id")


# ---- current-period spend ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GuardrailUsage:
    usage: Decimal  # spend in the current period by the requests the guardrail governs now
    resets_at: datetime | None  # when the period ends; None for a lifetime budget


def period_bounds(reset_interval: str | None, now: datetime | None = None) -> tuple[datetime | None, datetime | None]:
    """The current period's start and end: the UTC day, the week from Monday, the calendar month (the same
    windows as key limits); (None, None) for no interval, which is the guardrail's lifetime."""
    if reset_interval is None:
        return None, None
    start = window_starts(now)[reset_interval]
    if reset_interval == "daily":
        return start, start + timedelta(days=1)
    if reset_interval == "weekly":
        return start, start + timedelta(days=7)
    return start, (start + timedelta(days=32)).replace(day=1)


def guardrail_generations(*, guardrail_id: UUID, workspace_id: UUID, is_workspace_default: bool) -> Q:
    """The generations under a guardrail, by today's assignments: those made with the keys assigned to it, with
    keys its members created and, for a workspace default, with the workspace's keys that neither assignment
    covers. The record's spend sums them, and so does a workspace default's budget (one pool for the workspace:
    the same figure is checked and shown)."""
    governed = Q(api_key__guardrail_assignment__guardrail_id=guardrail_id) | Q(
        api_key__creator__guardrail_assignment__guardrail_id=guardrail_id
    )
    if is_workspace_default:
        governed |= Q(
            workspace_id=workspace_id,
            api_key__guardrail_assignment__isnull=True,
            api_key__creator__guardrail_assignment__isnull=True,
        )
    return governed


def guardrail_usage(*, guardrail: Guardrail, now: datetime | None = None) -> GuardrailUsage:
    """What the record shows: the current period's spend of requests made with the guardrail's keys, with
    keys its members created and, for a workspace default, with the workspace's keys that neither assignment
    covers. Credits charged count; BYOK requests count only with include_byok_in_budgets, at what they would
    have cost without the key (their list price). Attribution follows today's assignments."""
    start, resets_at = period_bounds(guardrail.reset_interval, now or timezone.now())
    governed = guardrail_generations(
        guardrail_id=guardrail.id,
        workspace_id=guardrail.workspace_id,
        is_workspace_default=guardrail.is_workspace_default,
    )
    rows = Generation.objects.filter(governed, account_id=guardrail.account_id)
    if start is not None:
        rows = rows.filter(created_at__gte=start)
    spent = Case(
        When(is_byok=False, then=F("cost")),
        When(is_byok=True, then=F("upstream_cost") if guardrail.include_byok_in_budgets else Value(ZERO)),
        output_field=_MONEY,
    )
    total = rows.aggregate(total=Coalesce(Sum(spent), Value(ZERO), output_field=_MONEY))["total"]
    return GuardrailUsage(usage=total, resets_at=resets_at)
