"""Issue 9, the upstream side (items 1-4): the Vertex token cache is keyed on the whole secret and its owner;
credentials an attempt sent never come back in upstream text (a hostile loopback upstream echoes them into
its error bodies and an in-band stream error, for a BYOK key and for the operator's key); IPv6 forms that embed
a private IPv4 address are refused; a credential that cannot be sent fails its attempt and the next endpoint
serves."""

import base64
import json
import logging
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.test import override_settings

from byok.credentials import ProviderCredentials
from byok.crypto import seal
from gateway.billing.models import Generation
from routing import http
from routing.errors import UpstreamError
from routing.http import client as http_client
from routing.models import Provider
from routing.providers.vertex import auth
from routing.redact import REDACTED, request_secrets, scrub
from routing.services import catalog_load, provider_credential_set
from routing.upstream import build_upstream_request, call, open_stream
from tests.support import Persona, assert_error_envelope, load_vertex_catalog, standin_endpoint
from tests.support import ask as canonical_ask

# ---- 3. the outbound address guard ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        # IPv6 forms that embed loopback, link-local (cloud metadata) or private IPv4 addresses
        "::127.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:0:7f00:1",
        "::ffff:0:a9fe:a9fe",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b::a00:1",
        "64:ff9b:1::a9fe:a9fe",
        "64:ff9b:1::808:808",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::",
        "2002:c0a8:101::1",
        "2002:a00:1:1::5",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1 (inverted last 32 bits)
        "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client 169.254.169.254
        "2001:0:a00:1:8000:63bf:f7f7:f7f7",  # Teredo, server 10.0.0.1
        # IPv6 that is not global unicast
        "::",
        "::1",
        "fe80::1",
        "fe80::1%eth0",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "ff02::1",
        "ff0e::1",
        "2001:db8::1",
        "100::1",
        # IPv4
        "127.0.0.1",
        "127.255.255.254",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "0.1.2.3",
        "100.64.0.1",
        "192.0.2.1",
        "198.18.0.1",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "not-an-address",
    ],
)
def test_non_public_addresses_are_refused(address):
    assert http.is_public_address(address) is False


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700::1111",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: server and client both public
    ],
)
def test_public_addresses_pass(address):
    assert http.is_public_address(address) is True


@pytest.mark.parametrize(
    "host", ["[::127.0.0.1]", "[64:ff9b::7f00:1]", "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]", "[::ffff:0:7f00:1]"]
)
def test_embedded_forms_are_refused_before_connecting(host):
    with pytest.raises(http.TransportError) as caught:
        http.request("GET", f"http://{host}:9/", headers={}, timeouts=http.Timeouts(connect=1, read=1))
    assert caught.value.kind == "refused"


# ---- 2. credentials out of upstream text ------------------------------------------------------------------

BYOK_KEY = "customer-secret-alpha-bravo-charlie"  # no digits and no known prefix: only the exact match finds it
OPERATOR_KEY = "operator-credential-delta-echo-foxtrot"
ANTHROPIC_KEY = "operator-anthropic-golf-hotel-india"


def test_scrub_removes_sent_credentials_and_key_shapes_but_keeps_prose():
    secrets = request_secrets(
        url="https://x.test/v1?api-version=2024-10-21&key=qs-secret-value",
        headers={"Authorization": f"Bearer {BYOK_KEY}", "x-api-key": OPERATOR_KEY, "anthropic-version": "2023-06-01"},
    )
    assert BYOK_KEY in secrets and OPERATOR_KEY in secrets and "qs-secret-value" in secrets
    assert "2023-06-01" not in secrets and "2024-10-21" not in secrets
    text = (
        f"Bad key {BYOK_KEY}; x-api-key={OPERATOR_KEY}; quoted {BYOK_KEY.replace('-', '%2D')}; "
        "qs-secret-value; cut short: " + BYOK_KEY[:12]
    )
    cleaned = scrub(text, secrets)
    assert BYOK_KEY[:12] not in cleaned and OPERATOR_KEY not in cleaned and "qs-secret-value" not in cleaned
    assert cleaned.startswith("Bad key " + REDACTED)
    shaped = (
        "key sk-proj-abcdEFGH1234567890xyz, AKIAIOSFODNN7EXAMPLE, Authorization: Bearer abc.def-123456789, "
        "token=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, "
        "AIzaSyA1234567890abcdefghijklmnopqrstu, ya29.a0AfH6SMBx123456, "
        "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2lnbmF0dXJl, "
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"
    )
    cleaned = scrub(shaped)
    for leaked in (
        "abcdEFGH1234567890",
        "IOSFODNN7EXAMPLE",
        "abc.def-123456789",
        "9f86d081884c7d659a2f",
        "AIzaSyA1234567890",
        "a0AfH6SMBx",
        "eyJhbGciOiJSUzI1NiJ9",
        "MIIEvQIBADANBg",
    ):
        assert leaked not in cleaned, leaked
    prose = (
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
        "(the prompt token count was too high). The key 'temperature' must be between 0 and 2. "
        "Invalid API key provided. Rate limit reached for requests per minute: Limit 500, Used 500."
    )
    assert scrub(prose) == prose


def test_every_credential_an_attempt_sends_is_known_to_the_scrubber():
    from routing.upstream import attempt_secrets

    secret_access_key = "wJalrXUtnFEMIbK7MDENGbPxRfiCYzEXAMPLEKEY"
    bedrock = build_upstream_request(
        endpoint=standin_endpoint(type("S", (), {"url": "http://127.0.0.1:9"}), adapter="bedrock"),
        request=canonical_ask(),
        credentials=ProviderCredentials(
            api_key="",
            is_byok=True,
            extra={"accessKeyId": "AKIDEXAMPLEKEYID", "secretAccessKey": secret_access_key, "region": "us-west-2"},
        ),
    )
    secrets = attempt_secrets(bedrock)
    signature = bedrock.headers["Authorization"].rsplit("Signature=", 1)[1]
    assert {"AKIDEXAMPLEKEYID", secret_access_key, signature, bedrock.headers["Authorization"]} <= set(secrets)
    echoed = f"SignatureDoesNotMatch: {bedrock.headers['Authorization']} secret {secret_access_key}"
    cleaned = scrub(echoed, secrets)
    assert "AKIDEXAMPLEKEYID" not in cleaned and signature not in cleaned and secret_access_key not in cleaned
    azure = build_upstream_request(
        endpoint=standin_endpoint(type("S", (), {"url": "http://127.0.0.1:9"}), adapter="azure"),
        request=canonical_ask(),
        credentials=ProviderCredentials(
            api_key="azure-key-value",
            is_byok=True,
            extra={
                "azure_config": {
                    "endpoint_url": "https://r.openai.azure.com/x?api-version=1&sig=query-sig-value",
                    "api_key": "azure-key-value",
                }
            },
        ),
    )
    assert {"azure-key-value", "query-sig-value"} <= set(attempt_secrets(azure))


class EchoHandler(BaseHTTPRequestHandler):
    """A hostile upstream: every error body (and an in-band stream error) quotes the credentials it received.
    Paths: /echo/<status>/v1/... (an error with that status) and /echo-stream/v1/... (content, then an
    in-band error)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        return

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization") or ""
        api_key = self.headers.get("x-api-key") or self.headers.get("api-key") or ""
        token = auth.removeprefix("Bearer ") or api_key
        message = (
            f"Invalid request. You sent Authorization: {auth} x-api-key: {api_key} "
            f"(token {token}); retrying with {token[:15]}"
        )
        parts = self.path.split("/")
        if parts[1] == "echo-stream":
            chunks = [
                {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
                {"error": {"message": message, "type": "server_error", "code": token}},
            ]
            body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)
            self._send(200, body, "text/event-stream")
            return
        status = int(parts[2])
        if self.path.endswith("/messages"):
            payload = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        else:
            payload = {"error": {"message": message, "type": "invalid_request_error", "code": f"bad_key_{token}"}}
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_port}"
    yield server
    server.shutdown()
    server.server_close()


def point_at(slug: str, base_url: str) -> None:
    provider = Provider.objects.get(slug=slug)
    provider.base_url = base_url
    provider.save()


def add_byok(persona: Persona, provider: str, key: str) -> None:
    response = persona.client(management=True).post("/api/v1/byok", {"provider": provider, "key": key}, format="json")
    assert response.status_code == 201, response.content


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def assert_no_credentials(*texts, keys=(BYOK_KEY, OPERATOR_KEY, ANTHROPIC_KEY)):
    for text in texts:
        text = text.decode() if isinstance(text, bytes) else text
        for key in keys:
            assert key not in text and key[:12] not in text, f"{key} leaked: {text[:300]}"


def test_upstream_text_never_carries_the_credentials_sent(alice, multi, echo_server, caplog):
    caplog.set_level(logging.DEBUG)
    provider_credential_set(provider=Provider.objects.get(slug="alpha"), plaintext=OPERATOR_KEY)
    add_byok(alice, "alpha", BYOK_KEY)
    client = alice.client()
    request = {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}}
    seen = []
    # 400 and 422 are the caller's problem: returned at once, with the BYOK key's echo.
    for status in (400, 422):
        point_at("alpha", f"{echo_server.url}/echo/{status}/v1")
        response = client.post("/api/v1/responses", request, format="json", HTTP_X_GATEWAY_METADATA="enabled")
        body = assert_error_envelope(response, status)
        assert "Invalid request" in body["error"]["message"] and REDACTED in body["error"]["message"]
        assert body["error"]["metadata"]["provider_code"].startswith("bad_key_")
        seen.append(response.content)
    # 429 falls back from the BYOK key to shared capacity: the last echo is the operator's own key.
    point_at("alpha", f"{echo_server.url}/echo/429/v1")
    response = client.post("/api/v1/responses", request, format="json")
    assert_error_envelope(response, 429)
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert [(a["status"], a["is_byok"]) for a in generation.provider_responses] == [(429, True), (429, False)]
    seen.append(response.content)
    # The same as a stream: the error comes before the 200, so it is an HTTP error too.
    streamed = client.post("/api/v1/responses", {**request, "stream": True}, format="json")
    assert streamed.status_code == 429
    seen.append(body_of(streamed))
    # An in-band error after content has begun.
    point_at("alpha", f"{echo_server.url}/echo-stream/v1")
    streamed = client.post("/api/v1/responses", {**request, "stream": True}, format="json")
    raw = body_of(streamed)
    assert streamed.status_code == 200 and b"response.failed" in raw
    seen.append(raw)
    seen += [json.dumps(list(Generation.objects.values()), default=str).encode(), caplog.text]
    assert_no_credentials(*seen)


def test_anthropic_x_api_key_echo_is_scrubbed(alice, echo_server, caplog):
    caplog.set_level(logging.DEBUG)
    catalog_load(
        data={
            "providers": [
                {
                    "slug": "hostile-anthropic",
                    "name": "Hostile",
                    "adapter": "anthropic",
                    "base_url": f"{echo_server.url}/echo/400/v1",
                    "allow_private_network": True,
                }
            ],
            "models": [
                {
                    "id": "hostile/claude",
                    "name": "Claude",
                    "context_length": 8000,
                    "endpoints": [
                        {
                            "provider": "hostile-anthropic",
                            "upstream_model": "claude",
                            "pricing": {"prompt": 1, "completion": 1},
                        }
                    ],
                }
            ],
        }
    )
    provider_credential_set(provider=Provider.objects.get(slug="hostile-anthropic"), plaintext=ANTHROPIC_KEY)
    response = alice.client().post("/api/v1/responses", {"model": "hostile/claude", "input": "Hi"}, format="json")
    body = assert_error_envelope(response, 400)
    assert "Invalid request" in body["error"]["message"]
    assert_no_credentials(response.content, caplog.text)


def test_in_band_stream_error_text_is_scrubbed_at_the_attempt(echo_server):
    """Below the API (whose in-band error message is generic anyway): the UpstreamError itself is clean."""
    endpoint = standin_endpoint(echo_server, adapter="openai_chat", base_url=f"{echo_server.url}/echo-stream/v1")
    upstream = build_upstream_request(
        endpoint=endpoint,
        request=canonical_ask(stream=True),
        credentials=ProviderCredentials(api_key=BYOK_KEY, is_byok=True),
    )
    with pytest.raises(UpstreamError) as caught:
        list(open_stream(endpoint=endpoint, upstream=upstream).events())
    assert "Invalid request" in caught.value.message
    assert_no_credentials(caught.value.message, caught.value.provider_code, repr(caught.value))
    endpoint = standin_endpoint(echo_server, adapter="azure", base_url=f"{echo_server.url}/echo/429/v1")
    upstream = build_upstream_request(
        endpoint=endpoint, request=canonical_ask(), credentials=ProviderCredentials(api_key=OPERATOR_KEY)
    )
    with pytest.raises(UpstreamError) as caught:
        call(endpoint=endpoint, upstream=upstream)
    assert caught.value.status == 429
    assert_no_credentials(caught.value.message, caught.value.provider_code)


# ---- 4. a credential that cannot be sent ------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["sk-al\x01pha", "sk-\x00alpha", "sk-alpha\r\nX-Injected: 1", "sk-ключ-alpha", "sk-alpha\x7f"]
)
def test_unsendable_credential_fails_the_attempt_and_the_next_endpoint_serves(alice, multi, bad):
    provider = Provider.objects.get(slug="alpha")  # a row from before credentials were checked: sealed as is
    sealed = seal(bad, aad=f"provider:{provider.pk}")
    provider.credential_sealed, provider.credential_key_id = sealed.blob, sealed.key_id
    provider.save()
    multi.clear()
    response = alice.client().post(
        "/api/v1/responses",
        {"model": "multi/model", "input": "Hi", "provider": {"order": ["alpha", "beta"]}},
        format="json",
    )
    assert response.status_code == 200, response.content
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert [(a["provider_name"], a["status"]) for a in generation.provider_responses][-2:] == [
        ("alpha", None),
        ("beta", 200),
    ]
    assert [r["credential"] for r in multi.requests_for("/chat/completions")] == ["sk-beta"], "nothing sent raw"


@pytest.mark.parametrize("bad", ["sk-\x00x", "sk-a\nb", "sk-\u2603", "sk-\ud800"])
def test_unsendable_header_is_an_attempt_failure(standin, bad):
    endpoint = standin_endpoint(standin, adapter="openai_chat")
    upstream = build_upstream_request(
        endpoint=endpoint, request=canonical_ask(), credentials=ProviderCredentials(api_key=bad)
    )
    before = len(standin.received)
    with pytest.raises(UpstreamError) as caught:
        call(endpoint=endpoint, upstream=upstream)
    assert caught.value.retryable and caught.value.error_type == "provider_unavailable"
    assert "could not be sent" in caught.value.message and len(standin.received) == before


def test_any_exception_while_sending_is_a_transport_error(standin, monkeypatch):
    """Past the header check (defence in depth), http.client's own failures are still attempt failures."""
    monkeypatch.setattr(http_client, "_check_headers", lambda headers: None)
    for bad in ("sk-\u2603", "sk-\ud800", "sk-a\nb"):  # UnicodeEncodeError in http.client, InvalidHeader
        with pytest.raises(http.TransportError) as caught:
            http.request(
                "POST",
                f"{standin.url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {bad}"},
                json_body={},
                allow_private=True,
            )
        assert caught.value.kind == "send" and bad not in str(caught.value)
        assert caught.value.__suppress_context__, "the cause (which quotes the header) is not chained"


# ---- 1. the Vertex token cache ----------------------------------------------------------------------------

VICTIM_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ATTACKER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


class TokenHandler(BaseHTTPRequestHandler):
    """Google's token endpoint, as far as it matters here: a token only for an assertion signed by the key."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        return

    def do_POST(self):
        from urllib.parse import parse_qs

        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        header, claims, signature = form["assertion"][0].split(".")
        self.server.exchanges += 1
        try:
            VICTIM_KEY.public_key().verify(
                base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
                f"{header}.{claims}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
            status, body = 200, {"access_token": f"ya29.victim-token-{self.server.exchanges}", "expires_in": 3599}
        except InvalidSignature:
            status, body = 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def token_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TokenHandler)
    server.daemon_threads = True
    server.exchanges = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def service_account(server, key) -> dict:
    return {
        "type": "service_account",
        "project_id": "victim-project",
        "private_key_id": "kid-victim-0001",
        "private_key": pem(key),
        "client_email": "prod@victim-project.iam.gserviceaccount.com",
        "token_uri": f"http://127.0.0.1:{server.server_port}/token",
        "region": "us-east5",
    }


@override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True)
def test_token_cache_is_keyed_on_the_whole_secret_and_its_owner(token_server):
    auth._cache.clear()
    victim = service_account(token_server, VICTIM_KEY)
    assert auth.access_token(victim, owner="byok:victim") == "ya29.victim-token-1"
    assert auth.access_token(victim, owner="byok:victim") == "ya29.victim-token-1"  # cached
    assert token_server.exchanges == 1
    # Same email and key id, another private key: a miss, signed with that key, refused.
    forged = {**victim, "private_key": pem(ATTACKER_KEY)}
    for owner in ("byok:attacker", "byok:victim"):
        with pytest.raises(UpstreamError) as caught:
            auth.access_token(forged, owner=owner)
        assert caught.value.error_type == "authentication"
    assert token_server.exchanges == 3
    # The very same secret under another owner does not share the token either.
    assert auth.access_token(victim, owner="byok:other") == "ya29.victim-token-4"
    for field in ("client_email", "private_key_id", "token_uri"):
        assert auth.token_cache_key({**victim, field: "x"}, owner="o") != auth.token_cache_key(victim, owner="o")


@override_settings(OUTBOUND_ALLOW_PRIVATE_NETWORKS=True)
def test_a_forged_service_account_never_gets_the_victims_token(db, standin, token_server):
    auth._cache.clear()
    load_vertex_catalog(base_url=f"{standin.url}/v1")
    from gateway.billing.provisioning import account_provision

    victim = Persona(account_provision(name="victim", plan="payg", credits=Decimal("1")))
    attacker = Persona(account_provision(name="attacker", plan="payg", credits=Decimal("1")))
    add_byok(victim, "google-vertex", json.dumps(service_account(token_server, VICTIM_KEY)))
    add_byok(attacker, "google-vertex", json.dumps(service_account(token_server, ATTACKER_KEY)))
    standin.clear()
    request = {"model": "anthropic/claude-vtx", "input": "Hi"}
    assert victim.client().post("/api/v1/responses", request, format="json").status_code == 200
    assert [r["credential"] for r in standin.requests_for(":rawPredict")] == ["ya29.victim-token-1"]
    response = attacker.client().post("/api/v1/responses", request, format="json")
    assert response.status_code >= 400 and response.json()["error"]
    assert len(standin.requests_for(":rawPredict")) == 1, "the attacker's request never reached Vertex"
    assert token_server.exchanges == 2


def test_partial_echoes_of_a_credential_are_scrubbed():
    """An upstream that echoes half a key, its tail, or the key in another case leaked that part; a run of 10
    characters of a long secret is now removed anywhere. Non-secret parts of structured values are kept."""
    key = "myBYOKsecretValue12345"
    secrets = request_secrets(
        url="https://x.test/v1",
        headers={"Authorization": f"Bearer {key}"},
        extra=("AKIDEXAMPLEKEYID12345/20260101/us-west-2/bedrock/aws4_request",),
    )
    for echoed in (
        f"Invalid key {key[:11]}...",
        f"Invalid key ...{key[-12:]}",
        f"key {key.lower()}",
        f"key {key.upper()}!",
        f"X{key[3:-3]}X",
    ):
        cleaned = scrub(echoed, secrets)
        assert REDACTED in cleaned, echoed
        for size in range(10, len(key) + 1):
            assert not any(key[i : i + size].lower() in cleaned.lower() for i in range(len(key) - size + 1)), cleaned
    prose = "Model not available in us-west-2 on 20260101 (aws4_request); the key 'temperature' is invalid."
    assert scrub(prose, secrets) == prose
