"""Guardrail writes: create, update (collections replaced), delete, and assignments to keys and members.
Each change bumps the "guardrails" version (through the model receivers in selectors.py and, for the bulk
writes that send no signal, here), so every process applies it within CACHE_VERSION_CHECK_SECONDS."""

from typing import Any
from uuid import UUID

from django.db import transaction

from gateway.accounts.models import ApiKey, Member, Workspace
from gateway.errors import GatewayError
from gateway.versions.counters import version_bump
from guardrails.models import Guardrail, GuardrailKeyAssignment, GuardrailMemberAssignment
from guardrails.selectors import VERSION

# What POST and PATCH /guardrails set (besides the workspace, fixed at creation).
EDITABLE = (
    "name",
    "description",
    "is_workspace_default",
    "limit_usd",
    "reset_interval",
    "include_byok_in_budgets",
    "allowed_models",
    "ignored_models",
    "allowed_providers",
    "ignored_providers",
    "enforce_zdr",
    "data_collection",
    "content_filters",
    "content_filter_builtins",
)


def guardrail_create(*, account_id: UUID, workspace_id: UUID, fields: dict[str, Any]) -> Guardrail:
    """A new guardrail; omitted fields take their defaults. As the workspace default it replaces the old one."""
    with transaction.atomic():
        guardrail = Guardrail(account_id=account_id, workspace_id=workspace_id)
        for name in EDITABLE:
            if name in fields:
                setattr(guardrail, name, fields[name])
        if guardrail.is_workspace_default:
            _clear_default(workspace_id=workspace_id)
        guardrail.save()
    return guardrail


def guardrail_update(*, guardrail: Guardrail, changes: dict[str, Any]) -> Guardrail:
    """Omitted fields stay; a sent value (a list, null) replaces the stored one."""
    with transaction.atomic():
        guardrail = Guardrail.objects.select_for_update().get(pk=guardrail.pk)
        for name in EDITABLE:
            if name in changes:
                setattr(guardrail, name, changes[name])
        if changes.get("is_workspace_default"):
            _clear_default(workspace_id=guardrail.workspace_id, keep=guardrail.pk)
        guardrail.save()
    return guardrail


def _clear_default(*, workspace_id: UUID, keep: UUID | None = None) -> None:
    """The workspace's current default stops being one (a workspace has at most one). The workspace row is
    locked first, so two requests making different guardrails the default take turns: the later one wins,
    instead of one of them tripping the one-default constraint."""
    Workspace.objects.select_for_update().filter(pk=workspace_id).first()
    defaults = Guardrail.objects.filter(workspace_id=workspace_id, is_workspace_default=True)
    if keep is not None:
        defaults = defaults.exclude(pk=keep)
    defaults.update(is_workspace_default=False)
    version_bump(VERSION)


def guardrail_delete(*, guardrail: Guardrail) -> None:
    """Its assignments go with it: those keys and members fall back to the workspace default."""
    guardrail.delete()


MSG_KEY_WORKSPACE = (
    "key_hashes: a key can be assigned a guardrail of its own workspace or an account-level one (of the "
    "account's default workspace); guardrail {name} belongs to workspace {workspace}, and these keys do not: "
    "{hashes}"
)
MSG_MEMBER_ACCOUNT_LEVEL = (
    "member_user_ids: a member's guardrail applies to the keys they create in every workspace, so it must be an "
    "account-level guardrail (of the account's default workspace); guardrail {name} belongs to workspace "
    "{workspace}"
)


def guardrail_is_account_level(*, guardrail: Guardrail) -> bool:
    """A guardrail of the account's default workspace: it may be assigned to any key and to members."""
    return Workspace.objects.filter(pk=guardrail.workspace_id, is_default=True).exists()


def guardrail_keys_outside(*, guardrail: Guardrail, keys: list[ApiKey]) -> list[ApiKey]:
    """The keys this guardrail cannot be assigned to: those of another workspace, unless it is account-level."""
    outside = [key for key in keys if key.workspace_id != guardrail.workspace_id]
    return [] if not outside or guardrail_is_account_level(guardrail=guardrail) else outside


def guardrail_keys_assign(*, guardrail: Guardrail, keys: list[ApiKey], assigned_by: str = "") -> int:
    """Assign the keys (of the guardrail's account) to it; a key that had another guardrail moves here. A key of
    another workspace than the guardrail's is refused (400 naming its hash) unless the guardrail is
    account-level."""
    if outside := guardrail_keys_outside(guardrail=guardrail, keys=keys):
        hashes = ", ".join(key.hash for key in outside)
        message = MSG_KEY_WORKSPACE.format(name=guardrail.name, workspace=guardrail.workspace_id, hashes=hashes)
        raise GatewayError(message, metadata={"fields": {"key_hashes": message.partition(": ")[2]}})
    rows = [GuardrailKeyAssignment(guardrail=guardrail, api_key=key, assigned_by=assigned_by) for key in keys]
    with transaction.atomic():
        GuardrailKeyAssignment.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["api_key"],
            update_fields=["guardrail", "assigned_by", "created_at"],
        )
        version_bump(VERSION)
    return len(rows)


def guardrail_keys_unassign(*, guardrail: Guardrail, keys: list[ApiKey]) -> int:
    """Remove the keys' assignments to this guardrail (keys assigned elsewhere are left alone)."""
    with transaction.atomic():
        removed, _ = GuardrailKeyAssignment.objects.filter(guardrail=guardrail, api_key__in=keys).delete()
        version_bump(VERSION)
    return removed


def guardrail_members_assign(*, guardrail: Guardrail, members: list[Member], assigned_by: str = "") -> int:
    """Assign the members to it; a member who had another guardrail moves here. Only an account-level guardrail
    can be a member's (400 otherwise)."""
    if members and not guardrail_is_account_level(guardrail=guardrail):
        message = MSG_MEMBER_ACCOUNT_LEVEL.format(name=guardrail.name, workspace=guardrail.workspace_id)
        raise GatewayError(message, metadata={"fields": {"member_user_ids": message.partition(": ")[2]}})
    rows = [
        GuardrailMemberAssignment(guardrail=guardrail, member=member, assigned_by=assigned_by) for member in members
    ]
    with transaction.atomic():
        GuardrailMemberAssignment.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["member"],
            update_fields=["guardrail", "assigned_by", "created_at"],
        )
        version_bump(VERSION)
    return len(rows)


def guardrail_members_unassign(*, guardrail: Guardrail, members: list[Member]) -> int:
    with transaction.atomic():
        removed, _ = GuardrailMemberAssignment.objects.filter(guardrail=guardrail, member__in=members).delete()
        version_bump(VERSION)
    return removed
