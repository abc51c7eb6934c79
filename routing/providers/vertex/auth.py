"""Service-account credentials -> a short-lived OAuth access token (the JWT bearer grant, RFC 7523), through
routing.http, cached until shortly before it expires.
https://developers.google.com/identity/protocols/oauth2/service-account#httprest

The cache is keyed on a SHA-256 of the whole secret (private key, email, key id, token URI) and on the
credential's owner (the BYOK key, or the operator): a customer who registers a service account with another's
email and key id but its own (bogus) private key gets a cache miss, signs with that key and is refused."""

import base64
import hashlib
import json
import math
import threading
import time
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from byok.credentials import ProviderCredentials
from routing import http, jsonsafe
from routing.errors import UpstreamError

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"
MAX_CACHED = 4096  # tokens kept per process (expired ones are dropped first, then the oldest)
_cache: dict[str, tuple[str, float]] = {}
_lock = threading.Lock()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_assertion(account: dict[str, Any], *, now: int) -> str:
    header = {"alg": "RS256", "typ": "JWT", "kid": str(account.get("private_key_id") or "")}
    claims = {
        "iss": str(account.get("client_email") or ""),
        "scope": SCOPE,
        "aud": account.get("token_uri") or DEFAULT_TOKEN_URI,
        "iat": now,
        "exp": now + 3600,
    }
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    try:
        key = serialization.load_pem_private_key(str(account.get("private_key") or "").encode(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise TypeError("RS256 needs an RSA key")
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    except (ValueError, TypeError, AttributeError, UnicodeError) as exc:
        raise UpstreamError(
            error_type="authentication", message="The service account's private key is unusable", retryable=True
        ) from exc
    return f"{signing_input}.{_b64(signature)}"


def token_cache_key(account: dict[str, Any], *, owner: str) -> str:
    """Everything that makes the token: the owner and every field of the secret, unambiguously encoded."""
    fields = [owner] + [
        str(account.get(name) or "") for name in ("private_key", "client_email", "private_key_id", "token_uri")
    ]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def _remember(cache_key: str, token: str, expires_at: float) -> None:
    with _lock:
        if len(_cache) >= MAX_CACHED:
            now = time.time()
            for key in [key for key, (_, expiry) in _cache.items() if expiry <= now]:
                del _cache[key]
            while len(_cache) >= MAX_CACHED:
                del _cache[next(iter(_cache))]  # the oldest insertion
        _cache[cache_key] = (token, expires_at)


def access_token(account: dict[str, Any], *, owner: str = "operator") -> str:
    """`owner`: who the credential belongs to ("byok:<key id>" or "operator"); part of the cache key."""
    cache_key = token_cache_key(account, owner=owner)
    with _lock:
        cached = _cache.get(cache_key)
    if cached and cached[1] > time.time() + 60:
        return cached[0]
    assertion = signed_assertion(account, now=int(time.time()))
    try:
        response = http.request(
            "POST",
            account.get("token_uri") or DEFAULT_TOKEN_URI,
            headers={},
            form_body={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion},
        )
    except http.TransportError as exc:
        raise UpstreamError(
            error_type="provider_unavailable", message="Could not reach the token endpoint", retryable=True
        ) from exc
    try:
        payload = jsonsafe.loads(response.content) if response.status_code == 200 else {}
    except ValueError:
        payload = {}
    finally:
        http.close(response)
    token = payload.get("access_token") if isinstance(payload, dict) else None
    if not token or not isinstance(token, str):
        raise UpstreamError(
            error_type="authentication",
            status=response.status_code,
            retryable=True,
            message="The service account was refused an access token",
        )
    try:
        lifetime = float(payload.get("expires_in") or 3600)
    except (TypeError, ValueError):
        lifetime = 3600.0
    lifetime = min(max(lifetime, 0.0), 3600.0) if math.isfinite(lifetime) else 0.0
    _remember(cache_key, token, time.time() + lifetime)
    return token


def vertex_credentials(credentials: ProviderCredentials) -> ProviderCredentials:
    """BYOK service-account credentials exchanged for a bearer token (plus project and region)."""
    account = credentials.extra if isinstance(credentials.extra, dict) else {}
    if "private_key" not in account and credentials.api_key.lstrip().startswith("{"):
        try:  # the operator's own service account, stored as the provider's credential
            account = json.loads(credentials.api_key)
        except ValueError:
            account = {}
    if "private_key" not in account:
        return credentials  # a ready-made access token
    owner = f"byok:{credentials.byok_key_id}" if credentials.is_byok else "operator"
    return ProviderCredentials(
        api_key=access_token(account, owner=owner),
        is_byok=credentials.is_byok,
        byok_key_id=credentials.byok_key_id,
        extra={"project_id": account.get("project_id") or "", "region": account.get("region") or "global"},
    )
