"""CORS for browser apps (issue 29 item 9): with CORS_ALLOWED_ORIGINS listing an origin, a preflight from it is
answered without a key (200 with the Access-Control-* headers the SDKs' browser requests need) and every answer
to it, errors included, carries Access-Control-Allow-Origin; any other origin, and the default configuration
(no origins), gets no CORS header at all, so the browser refuses to hand the answer to the page."""

import pytest
import requests
from django.test import override_settings
from rest_framework.test import APIClient

from tests.live import LiveGateway

APP = "https://app.example.com"
# What the openai and anthropic JS SDKs send from a browser on POST /chat/completions and /messages.
SDK_HEADERS = [
    "authorization",
    "content-type",
    "x-stainless-lang",
    "x-stainless-package-version",
    "x-stainless-os",
    "x-stainless-arch",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-retry-count",
    "x-stainless-timeout",
    "anthropic-version",
    "anthropic-dangerous-direct-browser-access",
    "x-api-key",
    "x-gateway-metadata",
    "x-openrouter-metadata",
]


def preflight(client: APIClient, path: str, origin: str, headers: list[str] = SDK_HEADERS):
    return client.options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS=",".join(headers),
    )


def cors_headers(response) -> dict:
    return {name.lower(): value for name, value in response.items() if name.lower().startswith("access-control-")}


@override_settings(CORS_ALLOWED_ORIGINS=[APP])
@pytest.mark.parametrize("path", ["/api/v1/chat/completions", "/api/v1/messages", "/api/v1/responses", "/api/v1/keys"])
def test_a_preflight_from_an_allowed_origin_is_answered_without_a_key(db, path):
    response = preflight(APIClient(), path, APP)
    assert response.status_code == 200, response.content
    headers = cors_headers(response)
    assert headers["access-control-allow-origin"] == APP
    assert "POST" in headers["access-control-allow-methods"]
    allowed = {name.strip() for name in headers["access-control-allow-headers"].split(",")}
    assert set(SDK_HEADERS) <= allowed, set(SDK_HEADERS) - allowed
    assert "access-control-allow-credentials" not in headers  # the key is a header, never a cookie


@override_settings(CORS_ALLOWED_ORIGINS=[APP])
@pytest.mark.parametrize(
    "origin", ["https://evil.example.com", "http://app.example.com", "https://app.example.com:8443"]
)
def test_a_preflight_from_another_origin_gets_no_cors_header(db, origin):
    assert "access-control-allow-origin" not in cors_headers(preflight(APIClient(), "/api/v1/responses", origin))


@override_settings(CORS_ALLOWED_ORIGINS=[APP])
def test_answers_to_an_allowed_origin_carry_the_header_errors_included(alice):
    client = alice.client()
    answer = client.get("/api/v1/key", HTTP_ORIGIN=APP)
    assert answer.status_code == 200
    assert cors_headers(answer)["access-control-allow-origin"] == APP
    exposed = {name.strip() for name in cors_headers(answer)["access-control-expose-headers"].split(",")}
    assert {"x-generation-id", "retry-after", "x-should-retry"} <= exposed
    refused = APIClient().get("/api/v1/key", HTTP_ORIGIN=APP)  # no key: the page can read the 401's body
    assert refused.status_code == 401 and cors_headers(refused)["access-control-allow-origin"] == APP
    other = client.get("/api/v1/key", HTTP_ORIGIN="https://evil.example.com")
    assert other.status_code == 200 and not cors_headers(other)


@override_settings(CORS_ALLOWED_ORIGINS=[APP])
def test_pages_outside_the_api_get_no_cors_header(db):
    assert not cors_headers(preflight(APIClient(), "/admin/login/", APP))


def test_the_default_configuration_sends_no_cors_header(alice):
    assert not cors_headers(preflight(APIClient(), "/api/v1/responses", APP))
    assert not cors_headers(alice.client().get("/api/v1/key", HTTP_ORIGIN=APP))


@pytest.mark.live
def test_a_real_gateway_reads_its_origins_from_the_environment(transactional_db, alice):
    """Through gunicorn and the settings as the environment gives them: a listed origin and `*` (any)."""
    for configured, origin, expected in [(f"{APP},https://other.example", APP, APP), ("*", APP, "*")]:
        gateway = LiveGateway(workers=1, threads=4, extra_env={"CORS_ALLOWED_ORIGINS": configured})
        try:
            answer = requests.options(
                f"{gateway.api}/chat/completions",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": ",".join(SDK_HEADERS),
                },
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["access-control-allow-origin"] == expected
            key = requests.get(
                f"{gateway.api}/key", headers={"Authorization": f"Bearer {alice.api_key}", "Origin": origin}, timeout=10
            )
            assert key.status_code == 200 and key.headers["access-control-allow-origin"] == expected
        finally:
            gateway.stop()


@pytest.mark.parametrize("origin", ["app.example.com", "https://app.example.com/path", "https://"])
def test_a_value_that_is_not_an_origin_is_refused_at_start(origin):
    """Not a policy that silently matches nothing: the settings refuse to load, naming the value."""
    from tests.gateway.test_secret_key import GOOD_KEY, load_settings, refused

    result = load_settings(SECRET_KEY=GOOD_KEY, CORS_ALLOWED_ORIGINS=f"https://ok.example,{origin}")
    assert refused(result) and "CORS_ALLOWED_ORIGINS" in result.stderr and origin in result.stderr, result.stderr
    assert "loaded" in load_settings(SECRET_KEY=GOOD_KEY, CORS_ALLOWED_ORIGINS="https://ok.example/,*").stdout
