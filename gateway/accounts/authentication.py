"""Bearer API-key authentication for /api/v1, from an in-process cache of keys by hash.

The cache is dropped whenever the "keys" version changes (gateway.versions): every change that can affect
authentication or the Caller bumps it, so a key disabled, deleted, expired early or limited stops being
served from the cache within CACHE_VERSION_CHECK_SECONDS in every process (at once in the one that changed
it). The receivers below cover saves and deletes (admin, API, services, cascades); a bulk
`QuerySet.update()` of keys, accounts or members sends no signal: call `api_keys_changed()` after one.
A key that is not found is not cached (unknown keys cannot fill memory; a new key works at once)."""

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from gateway.accounts.keys import KEY_PREFIX, key_hash
from gateway.accounts.models import Account, ApiKey, KeyKind, Member, Plan
from gateway.errors import MSG_INVALID_KEY, MSG_MISSING_AUTH
from gateway.versions.counters import VersionedCache, version_bump

if TYPE_CHECKING:  # drf_spectacular.openapi imports DRF's views, which import this module (DRF's settings)
    from drf_spectacular.openapi import AutoSchema

VERSION = "keys"
# Keys kept per process (the oldest go first): about 1 KB each.
MAX_CACHED_KEYS = 4096


@dataclass(frozen=True)
class Caller:
    """Who is calling: the authenticated key and its scope. `request.user` on API views."""

    key_id: int
    key_hash: str
    kind: str
    account_id: UUID
    workspace_id: UUID
    plan: str
    creator_user_id: str | None
    has_limit: bool = False

    is_authenticated = True

    @property
    def is_management(self) -> bool:
        return self.kind == KeyKind.MANAGEMENT

    @property
    def is_enterprise(self) -> bool:
        return self.plan == Plan.ENTERPRISE


def request_caller(request: Request) -> Caller:
    """The Caller that ApiKeyAuthentication put on `request.user` (the API views' permission classes let no
    other user through)."""
    return cast(Caller, request.user)


@dataclass(frozen=True)
class KeyState:
    """A key as authentication sees it: its Caller and what is checked on every request."""

    caller: Caller
    disabled: bool
    expires_at: datetime | None
    suspended: str | None = None  # the 403 message while the key's account is suspended


_keys: VersionedCache[str, KeyState] = VersionedCache(VERSION, max_entries=MAX_CACHED_KEYS)


def api_keys_changed() -> None:
    """Every process drops its cached keys: this one at once, the others within the version window."""
    version_bump(VERSION)


# The account's columns a cached key carries (balance and reserved moves are saves of other columns).
ACCOUNT_FIELDS_CACHED = frozenset({"plan", "suspended", "suspended_reason"})
MSG_SUSPENDED = "This account is suspended{reason}; every key of the account is refused. Contact the service's staff"


def suspended_message(reason: str) -> str:
    return MSG_SUSPENDED.format(reason=f" ({reason})" if reason else "")


@receiver([post_save, post_delete], sender=ApiKey)
@receiver([post_save, post_delete], sender=Account)
@receiver([post_save, post_delete], sender=Member)
def _keys_changed_by(
    sender: type[ApiKey | Account | Member],
    created: bool = False,
    update_fields: frozenset[str] | None = None,
    **kwargs: Any,
) -> None:
    """A new row cannot be in any cache; an account matters for its plan (balance moves are not saves)."""
    if created or (sender is Account and update_fields is not None and not ACCOUNT_FIELDS_CACHED & set(update_fields)):
        return
    api_keys_changed()


def key_state_load(hash_: str) -> KeyState | None:
    """The key with this hash from the database, or None."""
    key = (
        ApiKey.objects.select_related("account", "creator")
        .filter(hash=hash_)
        .only(
            "id",
            "hash",
            "kind",
            "disabled",
            "expires_at",
            "account_id",
            "workspace_id",
            "limit",
            "account__plan",
            "account__suspended",
            "account__suspended_reason",
            "creator__user_id",
        )
        .first()
    )
    if key is None:
        return None
    caller = Caller(
        key_id=key.id,
        key_hash=key.hash,
        kind=key.kind,
        account_id=key.account_id,
        workspace_id=key.workspace_id,
        plan=key.account.plan,
        creator_user_id=key.creator.user_id if key.creator else None,
        has_limit=key.limit is not None,
    )
    suspended = suspended_message(key.account.suspended_reason) if key.account.suspended else None
    return KeyState(caller=caller, disabled=key.disabled, expires_at=key.expires_at, suspended=suspended)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Caller, str]:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            key = request.META.get("HTTP_X_API_KEY", "")
            view = (getattr(request, "parser_context", None) or {}).get("view")
            if key and getattr(view, "accepts_x_api_key", False):  # POST /messages: Anthropic clients send it
                return self.authenticate_key(key.strip())
            raise exceptions.NotAuthenticated(MSG_MISSING_AUTH)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            raise exceptions.AuthenticationFailed(MSG_INVALID_KEY)
        return self.authenticate_key(token.strip())

    def authenticate_key(self, token: str) -> tuple[Caller, str]:
        if not token.startswith(KEY_PREFIX) or len(token) > 200:
            raise exceptions.AuthenticationFailed(MSG_INVALID_KEY)
        state = _keys.get_or_load(key_hash(token), key_state_load)
        if state is None:
            raise exceptions.AuthenticationFailed(MSG_INVALID_KEY)
        if state.suspended is not None:
            raise exceptions.PermissionDenied(state.suspended)
        if state.disabled:
            raise exceptions.AuthenticationFailed("API key is disabled")
        if state.expires_at is not None and state.expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed("API key has expired")
        return state.caller, state.caller.key_hash

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "gateway.accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: "AutoSchema") -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key: `Authorization: Bearer sk-gw-v1-...`. Management operations need a "
            "management key; inference endpoints need an inference key.",
        }
