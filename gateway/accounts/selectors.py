from uuid import UUID

from django.db.models import QuerySet
from django.utils import timezone

from gateway.accounts.models import ApiKey, Member, Workspace
from gateway.errors import NotFound

MSG_KEY_NOT_FOUND = "API key not found"


def api_keys_list(
    *, account_id: UUID, workspace_id: UUID | None = None, include_disabled: bool = True, include_expired: bool = True
) -> QuerySet[ApiKey]:
    keys = ApiKey.objects.filter(account_id=account_id).select_related("creator").order_by("-created_at", "-id")
    if workspace_id is not None:
        keys = keys.filter(workspace_id=workspace_id)
    if not include_disabled:
        keys = keys.filter(disabled=False)
    if not include_expired:
        keys = keys.exclude(expires_at__lte=timezone.now())
    return keys


def api_key_get(*, account_id: UUID, key_hash: str) -> ApiKey:
    """A key of this account by hash; another account's key is simply not found."""
    key = ApiKey.objects.filter(account_id=account_id, hash=key_hash).select_related("creator").first()
    if key is None:
        raise NotFound(MSG_KEY_NOT_FOUND)
    return key


def workspace_exists(*, account_id: UUID, workspace_id: UUID) -> bool:
    return Workspace.objects.filter(pk=workspace_id, account_id=account_id).exists()


def live_key_hashes(*, account_id: UUID, hashes: list[str]) -> set[str]:
    """Those of `hashes` that are live (not disabled) API keys of this account."""
    return set(
        ApiKey.objects.filter(account_id=account_id, hash__in=hashes, disabled=False).values_list("hash", flat=True)
    )


def member_user_ids(*, account_id: UUID, user_ids: list[str]) -> set[str]:
    """Those of `user_ids` that are members of this account."""
    return set(Member.objects.filter(account_id=account_id, user_id__in=user_ids).values_list("user_id", flat=True))
