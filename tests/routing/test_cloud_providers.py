"""Cloud platforms with their own credentials: Anthropic on Vertex with a customer's service account (the JWT
bearer exchange to a token endpoint on loopback, token caching, BYOK requests through the stand-in), and Bedrock
access keys signed with SigV4."""

import base64
import json
from decimal import Decimal

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.test import override_settings

from routing.errors import UpstreamError
from routing.providers.vertex import auth
from routing.services import catalog_load
from tests.support import Persona, load_vertex_catalog

PRIVATE_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = PRIVATE_KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()


def service_account(token_uri: str) -> dict:
    return {
        "type": "service_account",
        "project_id": "proj-7",
        "private_key_id": "kid-0123456789abcdef",
        "private_key": PEM,
        "client_email": "gw@proj-7.iam.gserviceaccount.com",
        "token_uri": token_uri,
        "region": "us-east5",
    }


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_assertion_is_a_valid_rs256_jwt():
    account = service_account("https://oauth2.googleapis.com/token")
    header, claims, signature = auth.signed_assertion(account, now=1_700_000_000).split(".")
    assert json.loads(_unb64(header)) == {"alg": "RS256", "typ": "JWT", "kid": "kid-0123456789abcdef"}
    payload = json.loads(_unb64(claims))
    assert payload == {
        "iss": "gw@proj-7.iam.gserviceaccount.com",
        "scope": auth.SCOPE,
        "aud": "https://oauth2.googleapis.com/token",
        "iat": 1_700_000_000,
        "exp": 1_700_003_600,
    }
    PRIVATE_KEY.public_key().verify(
        _unb64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )


@override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True)
def test_token_exchange_and_cache(standin):
    auth._cache.clear()
    standin.clear()
    account = service_account(f"{standin.url}/token")
    assert auth.access_token(account) == "ya29.standin-token"
    assert auth.access_token(account) == "ya29.standin-token"
    exchanges = standin.requests_for("/token")
    assert len(exchanges) == 1 and exchanges[0]["body"]["assertion"][0].count(".") == 2


def test_token_endpoint_on_a_private_address_is_refused_by_default(standin):
    auth._cache.clear()
    with pytest.raises(UpstreamError) as caught:
        auth.access_token(service_account(f"{standin.url}/token"))
    assert caught.value.retryable and caught.value.error_type == "provider_unavailable"


@override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True)
def test_byok_service_account_routes_through_vertex(db, standin):
    auth._cache.clear()
    load_vertex_catalog(base_url=f"{standin.url}/v1")
    from gateway.billing.provisioning import account_provision

    gina = Persona(account_provision(name="gina", plan="payg", credits=Decimal("1")))
    created = gina.client(management=True).post(
        "/api/v1/byok",
        {"provider": "google-vertex", "key": json.dumps(service_account(f"{standin.url}/token"))},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert "BEGIN PRIVATE KEY" not in created.content.decode()
    standin.clear()
    response = gina.client().post("/api/v1/responses", {"model": "anthropic/claude-vtx", "input": "Hi"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["usage"]["is_byok"] is True
    predict = standin.requests_for(":rawPredict")[-1]
    assert predict["path"].endswith(
        "/projects/proj-7/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    )
    assert predict["credential"] == "ya29.standin-token"
    assert predict["body"]["anthropic_version"] == "vertex-2023-10-16" and "model" not in predict["body"]
    assert len(standin.requests_for("/token")) == 1
    streamed = gina.client().post(
        "/api/v1/responses", {"model": "anthropic/claude-vtx", "input": "Hi", "stream": True}, format="json"
    )
    raw = b"".join(streamed.streaming_content)
    assert b"response.completed" in raw and raw.endswith(b"data: [DONE]\n\n")
    assert standin.requests_for(":streamRawPredict")[-1]["credential"] == "ya29.standin-token"


@override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True)
def test_operator_service_account_as_provider_credential(standin):
    from byok.credentials import ProviderCredentials

    auth._cache.clear()
    stored = json.dumps(service_account(f"{standin.url}/token"))
    exchanged = auth.vertex_credentials(ProviderCredentials(api_key=stored))
    assert exchanged.api_key == "ya29.standin-token" and exchanged.extra == {
        "project_id": "proj-7",
        "region": "us-east5",
    }


def test_byok_bedrock_access_key_routes_with_sigv4(db, standin):
    catalog_load(
        data={
            "providers": [
                {
                    "slug": "amazon-bedrock",
                    "name": "Bedrock",
                    "adapter": "bedrock",
                    "credential_kind": "bedrock",
                    "base_url": f"{standin.url}",
                    "allow_private_network": True,
                }
            ],
            "models": [
                {
                    "id": "anthropic/claude-bdr",
                    "name": "Claude on Bedrock",
                    "context_length": 200000,
                    "endpoints": [
                        {
                            "provider": "amazon-bedrock",
                            "upstream_model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                            "pricing": {"prompt": 3, "completion": 15},
                        }
                    ],
                }
            ],
        }
    )
    from gateway.billing.provisioning import account_provision

    hana = Persona(account_provision(name="hana", plan="payg", credits=Decimal("1")))
    created = hana.client(management=True).post(
        "/api/v1/byok",
        {
            "provider": "amazon-bedrock",
            "key": {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "S" * 40, "region": "us-west-2"},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    standin.clear()
    for stream in (False, True):
        response = hana.client().post(
            "/api/v1/responses", {"model": "anthropic/claude-bdr", "input": "Hi", "stream": stream}, format="json"
        )
        assert response.status_code == 200
        if stream:
            assert b"response.completed" in b"".join(response.streaming_content)
    calls = standin.requests_for("/converse") + standin.requests_for("/converse-stream")
    assert len(calls) == 2
    for call in calls:
        assert "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/" in call["path"]
        assert call["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAABCDEFGHIJKLMNOP/")
        assert "/us-west-2/bedrock/aws4_request" in call["headers"]["authorization"]
