from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from gateway.accounts.keys import key_generate, key_hash, key_mask
from gateway.accounts.models import Account, ApiKey, KeyKind, LimitReset, Member, Workspace
from gateway.errors import GatewayError

MAX_KEY_LIMIT = Decimal("1000000000")  # USD, as POST/PATCH /keys (the column holds 12 integer digits)


@dataclass(frozen=True)
class IssuedKey:
    """A freshly created key: the only moment its plaintext exists outside the caller's hands."""

    key: ApiKey
    plaintext: str

    def __repr__(self) -> str:
        return f"IssuedKey(hash={self.key.hash!r}, label={self.key.label!r})"


@dataclass(frozen=True)
class ProvisionedAccount:
    account_id: UUID
    workspace_id: UUID
    inference_key: IssuedKey
    management_key: IssuedKey


def account_create(*, name: str, plan: str) -> Account:
    with transaction.atomic():
        account = Account.objects.create(name=name, plan=plan)
        Workspace.objects.create(account=account, name="Default", is_default=True)
    return account


def api_key_create(
    *,
    account_id: UUID,
    name: str,
    kind: str = KeyKind.INFERENCE,
    workspace_id: UUID | None = None,
    creator_user_id: str | None = None,
    limit: Decimal | None = None,
    limit_reset: str | None = None,
    include_byok_in_limit: bool = False,
    expires_at: datetime | None = None,
) -> IssuedKey:
    workspace, creator = api_key_check(
        account_id=account_id,
        kind=kind,
        workspace_id=workspace_id,
        creator_user_id=creator_user_id,
        limit=limit,
        limit_reset=limit_reset,
        expires_at=expires_at,
    )
    plaintext = key_generate(kind=kind)
    key = ApiKey.objects.create(
        hash=key_hash(plaintext),
        label=key_mask(plaintext),
        kind=kind,
        name=name,
        account_id=account_id,
        workspace=workspace,
        creator=creator,
        limit=limit,
        limit_reset=limit_reset,
        include_byok_in_limit=include_byok_in_limit,
        expires_at=expires_at,
    )
    return IssuedKey(key=key, plaintext=plaintext)


def api_key_check(
    *,
    account_id: UUID,
    kind: str = KeyKind.INFERENCE,
    workspace_id: UUID | None = None,
    creator_user_id: str | None = None,
    limit: Decimal | None = None,
    limit_reset: str | None = None,
    expires_at: datetime | None = None,
) -> tuple[Workspace, Member | None]:
    """Everything a new key must satisfy (the API and the admin both come here): its workspace and creator
    belong to its account, its limit and expiry are valid. GatewayError (400) naming the field otherwise."""
    if kind not in KeyKind.values:
        raise _field_error("kind", f"must be one of {KeyKind.values}")
    api_key_limit_check(limit=limit, limit_reset=limit_reset)
    if expires_at is not None:
        if expires_at <= timezone.now():
            raise _field_error("expires_at", "must be in the future")
    workspace = _workspace_of(account_id=account_id, workspace_id=workspace_id)
    creator = None
    if creator_user_id is not None:
        creator = Member.objects.filter(account_id=account_id, user_id=creator_user_id).first()
        if creator is None:
            raise _field_error("creator_user_id", "not a member of this account")
    return workspace, creator


def api_key_limit_check(*, limit: object, limit_reset: object) -> None:
    if limit is not None and (
        not isinstance(limit, Decimal | int)
        or isinstance(limit, bool)
        or not Decimal(limit).is_finite()
        or not 0 <= limit <= MAX_KEY_LIMIT
    ):
        raise _field_error("limit", f"must be a number from 0 to {MAX_KEY_LIMIT:f} (USD), or null")
    if limit_reset is not None and limit_reset not in LimitReset.values:
        raise _field_error("limit_reset", f"must be one of {LimitReset.values} or null")


def _field_error(field: str, message: str) -> GatewayError:
    return GatewayError(f"{field}: {message}", metadata={"fields": {field: message}})


_UPDATABLE = ("name", "disabled", "limit", "limit_reset", "include_byok_in_limit")


def api_key_update(*, key: ApiKey, changes: dict[str, Any]) -> ApiKey:
    """GatewayError (400) for a limit the API would refuse; nothing is saved then."""
    if "limit" in changes or "limit_reset" in changes:
        api_key_limit_check(
            limit=changes.get("limit", key.limit), limit_reset=changes.get("limit_reset", key.limit_reset)
        )
    fields = [name for name in _UPDATABLE if name in changes]
    for name in fields:
        setattr(key, name, changes[name])
    if fields:
        key.save(update_fields=[*fields, "updated_at"])
    return key


def api_key_delete(*, key: ApiKey) -> None:
    key.delete()


def _workspace_of(*, account_id: UUID, workspace_id: UUID | None) -> Workspace:
    workspaces = Workspace.objects.filter(account_id=account_id)
    workspace = (workspaces.filter(pk=workspace_id) if workspace_id else workspaces.filter(is_default=True)).first()
    if workspace is None:
        raise _field_error("workspace_id", "no such workspace in this account")
    return workspace
