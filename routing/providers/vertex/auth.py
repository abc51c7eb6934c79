"""Service-account credentials -> a short-lived OAuth access token (the JWT bearer grant, RFC 7523), through
routing.http, cached per service-account key until shortly before it expires.
https://developers.google.com/identity/protocols/oauth2/service-account#httprest"""

import base64
import json
import threading
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from byok.credentials import ProviderCredentials
from routing import http
from routing.errors import UpstreamError

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"
_cache: dict[tuple[str, str], tuple[str, float]] = {}
_lock = threading.Lock()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_assertion(account: dict, *, now: int) -> str:
    header = {"alg": "RS256", "typ": "JWT", "kid": account["private_key_id"]}
    claims = {"iss": account["client_email"], "scope": SCOPE, "aud": account.get("token_uri") or DEFAULT_TOKEN_URI,
              "iat": now, "exp": now + 3600}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    try:
        key = serialization.load_pem_private_key(account["private_key"].encode(), password=None)
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    except (ValueError, TypeError) as exc:
        raise UpstreamError(error_type="authentication", message="The service account's private key is unusable",
                            retryable=True) from exc
    return f"{signing_input}.{_b64(signature)}"


def access_token(account: dict) -> str:
    cache_key = (account["client_email"], account["private_key_id"])
    with _lock:
        cached = _cache.get(cache_key)
    if cached and cached[1] > time.time() + 60:
        return cached[0]
    assertion = signed_assertion(account, now=int(time.time()))
    try:
        response = http.request("POST", account.get("token_uri") or DEFAULT_TOKEN_URI, headers={}, form_body={
            "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion})
    except http.TransportError as exc:
        raise UpstreamError(error_type="provider_unavailable", message="Could not reach the token endpoint",
                            retryable=True) from exc
    try:
        payload = response.json() if response.status_code == 200 else {}
    except ValueError:
        payload = {}
    finally:
        response.close()
    token = payload.get("access_token") if isinstance(payload, dict) else None
    if not token:
        raise UpstreamError(error_type="authentication", status=response.status_code, retryable=True,
                            message="The service account was refused an access token")
    with _lock:
        _cache[cache_key] = (token, time.time() + float(payload.get("expires_in") or 3600))
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
    return ProviderCredentials(
        api_key=access_token(account), is_byok=credentials.is_byok, byok_key_id=credentials.byok_key_id,
        extra={"project_id": account["project_id"], "region": account.get("region") or "global"},
    )
