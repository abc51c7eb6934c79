"""Bearer API-key authentication for /api/v1."""

from dataclasses import dataclass
from uuid import UUID

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from gateway.accounts.keys import KEY_PREFIX, key_hash
from gateway.accounts.models import ApiKey, KeyKind, Plan
from gateway.errors import MSG_INVALID_KEY, MSG_MISSING_AUTH


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


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            raise exceptions.NotAuthenticated(MSG_MISSING_AUTH)
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token.startswith(KEY_PREFIX) or len(token) > 200:
            raise exceptions.AuthenticationFailed(MSG_INVALID_KEY)
        key = (
            ApiKey.objects.select_related("account", "creator")
            .filter(hash=key_hash(token))
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
                "creator__user_id",
            )
            .first()
        )
        if key is None:
            raise exceptions.AuthenticationFailed(MSG_INVALID_KEY)
        if key.disabled:
            raise exceptions.AuthenticationFailed("API key is disabled")
        if key.expires_at is not None and key.expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed("API key has expired")
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
        return caller, key.hash

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "gateway.accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key: `Authorization: Bearer sk-gw-v1-...`. Management operations need a "
            "management key; inference endpoints need an inference key.",
        }
