"""Every error on the Anthropic Messages door comes back in Anthropic's shape
(`{"type": "error", "error": {"type", "message"}}`, https://docs.anthropic.com/en/api/errors), including those
made before the view runs: the body limits of gateway.middleware, Django's 404/500 handlers, DRF's 405 and
throttle. Raw HTTP in-process for every status, and the official anthropic SDK against a live gunicorn, which
raises its typed errors by status and reads error.type."""

import json
import socket
from decimal import Decimal

import anthropic
import pytest
import requests
from django.test import Client, override_settings

from gateway.billing.provisioning import account_provision
from tests.live import LiveGateway
from tests.support import Persona

URL = "/api/v1/messages"
HI = {"model": "standin/echo", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}


def assert_anthropic_error(response, status: int, error_type: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["type"] == "error", body
    assert body["error"]["type"] == error_type, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body


def post_raw(persona: Persona | None, body: bytes, **extra):
    headers = {"HTTP_X_API_KEY": persona.api_key} if persona else {}
    return Client().generic("POST", URL, body, content_type="application/json", **headers, **extra)


@override_settings(MAX_REQUEST_BODY_BYTES=1024)
def test_a_body_over_the_limit_is_anthropics_request_too_large(alice):
    big = json.dumps({**HI, "messages": [{"role": "user", "content": "x" * 4096}]}).encode()
    body = assert_anthropic_error(post_raw(alice, big), 413, "request_too_large")
    assert "1024" in body["error"]["message"]


def test_errors_made_before_the_view_are_anthropics(alice):
    # a malformed Content-Length, a compressed body, an unsupported transfer coding (gateway.middleware)
    assert_anthropic_error(post_raw(alice, b"{}", CONTENT_LENGTH="x1"), 400, "invalid_request_error")
    assert_anthropic_error(post_raw(alice, b"{}", HTTP_CONTENT_ENCODING="gzip"), 415, "invalid_request_error")
    assert_anthropic_error(post_raw(alice, b"{}", HTTP_TRANSFER_ENCODING="gzip"), 501, "api_error")
    # a path under the door that does not exist (Anthropic clients call /v1/messages/batches)
    missing = Client().post(f"{URL}/batches", HI, content_type="application/json", HTTP_X_API_KEY=alice.api_key)
    assert_anthropic_error(missing, 404, "not_found_error")


def test_errors_made_by_the_view_stay_anthropics(alice, standin_catalog):
    assert_anthropic_error(post_raw(None, json.dumps(HI).encode()), 401, "authentication_error")
    assert_anthropic_error(Client().get(URL, HTTP_X_API_KEY=alice.api_key), 405, "invalid_request_error")
    assert_anthropic_error(post_raw(alice, b"{not json"), 400, "invalid_request_error")
    unknown = json.dumps({**HI, "model": "nobody/none"}).encode()
    assert_anthropic_error(post_raw(alice, unknown), 404, "not_found_error")
    with override_settings(GATEWAY_RATE_LIMIT="1/min"):
        from django.core.cache import cache

        cache.clear()
        post_raw(alice, json.dumps(HI).encode())
        limited = post_raw(alice, json.dumps(HI).encode())
        assert_anthropic_error(limited, 429, "rate_limit_error")
        assert limited["Retry-After"]


def test_other_doors_keep_the_gateway_envelope(alice):
    with override_settings(MAX_REQUEST_BODY_BYTES=16):
        response = Client().post("/api/v1/responses", HI, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == 413 and "type" not in response.json()


def raw_http(gateway: LiveGateway, rest: bytes) -> bytes:
    """POST /api/v1/messages with these header lines and body, over a socket of our own; the whole answer."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as conn:
        conn.sendall(b"POST " + URL.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + rest)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.live
def test_the_anthropic_sdk_raises_its_typed_errors_for_gateway_made_errors(transactional_db, standin_catalog):
    gateway = LiveGateway(workers=1, threads=4, extra_env={"MAX_REQUEST_BODY_BYTES": "4096"})
    try:
        frank = Persona(account_provision(name="frank", plan="payg", credits=Decimal("5")))
        client = anthropic.Anthropic(base_url=f"{gateway.url}/api", api_key=frank.api_key, max_retries=0, timeout=20)
        # When the body is over the limit (refused by the middleware, before authentication)
        with pytest.raises(anthropic.ContentTooLargeError) as too_large:
            client.messages.create(
                model="standin/echo", max_tokens=5, messages=[{"role": "user", "content": "x" * 8192}]
            )
        # Then the SDK reads Anthropic's error type
        assert too_large.value.type == "request_too_large"  # the SDK's error.type
        # And so for a key that is wrong, and a model that does not exist
        wrong = anthropic.Anthropic(base_url=f"{gateway.url}/api", api_key="sk-gw-v1-inf-wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as unauthorized:
            wrong.messages.create(model="standin/echo", max_tokens=5, messages=[{"role": "user", "content": "Hi"}])
        assert unauthorized.value.type == "authentication_error"
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.count_tokens(model="nobody/none", messages=[{"role": "user", "content": "Hi"}])
        assert missing.value.type == "not_found_error"
        # And over raw HTTP, a Content-Length over the limit is refused from the header alone
        raw = requests.post(
            f"{gateway.url}{URL}", data=b"{" + b" " * 8192 + b"}", headers={"x-api-key": frank.api_key}, timeout=10
        )
        assert raw.status_code == 413 and raw.json()["error"]["type"] == "request_too_large"
        assert raw.json()["type"] == "error"
        # And a request gunicorn itself refuses (Content-Length together with Transfer-Encoding) on the door
        refused = raw_http(gateway, b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}")
        assert refused.startswith(b"HTTP/1.1 400 ")
        body = json.loads(refused.partition(b"\r\n\r\n")[2])
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
        assert body["error"]["message"].startswith("Invalid ")  # gunicorn's refusal, named by the worker
    finally:
        gateway.stop()
