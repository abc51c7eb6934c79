"""Every non-200 answer under /api/v1 uses the spec's Error body."""

import logging

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

from gateway.errors import MSG_INTERNAL
from tests.support import assert_error_envelope


def test_malformed_json_is_400(alice):
    response = alice.client(management=True).generic(
        "POST", "/api/v1/keys", '{"name": "x",', content_type="application/json"
    )
    body = assert_error_envelope(response, 400)
    assert body["error"]["message"].startswith("Malformed JSON body")


def test_unsupported_media_type_is_415(alice):
    response = alice.client(management=True).generic(
        "POST", "/api/v1/keys", "name=x", content_type="application/x-www-form-urlencoded"
    )
    assert_error_envelope(response, 415)


def test_unknown_api_path_is_404_envelope(alice):
    assert_error_envelope(alice.client().get("/api/v1/no-such-thing"), 404)
    assert_error_envelope(APIClient().get("/api/v1/no-such-thing"), 404)


def test_method_not_allowed_is_405(alice):
    body = assert_error_envelope(alice.client(management=True).put("/api/v1/credits", {}, format="json"), 405)
    assert "PUT" in body["error"]["message"]


@override_settings(MAX_REQUEST_BODY_BYTES=1000, DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_body_over_the_limit_is_413(alice):
    big = '{"name": "' + "x" * 1000 + '"}'
    body = assert_error_envelope(
        alice.client(management=True).generic("POST", "/api/v1/keys", big, content_type="application/json"), 413
    )
    assert "1000 bytes" in body["error"]["message"]


@override_settings(MAX_REQUEST_BODY_BYTES=1000, DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_body_at_the_limit_is_accepted(alice):
    name = "x" * (1000 - len('{"name": ""}'))
    payload = '{"name": "' + name[:200] + '"' + " " * (len(name) - 200) + "}"
    assert len(payload.encode()) == 1000
    response = alice.client(management=True).generic("POST", "/api/v1/keys", payload, content_type="application/json")
    assert response.status_code == 201


@override_settings(GATEWAY_RATE_LIMIT="2/min")
def test_throttled_requests_are_429_with_retry_after(alice):
    from django.core.cache import cache

    cache.clear()
    client = alice.client()
    assert [client.get("/api/v1/key").status_code for _ in range(2)] == [200, 200]
    response = client.get("/api/v1/key")
    assert_error_envelope(response, 429)
    assert int(response["Retry-After"]) > 0
    cache.clear()


@pytest.mark.urls("tests.urls_boom")
def test_unexpected_exception_in_api_view_is_generic_500(alice, caplog):
    with caplog.at_level(logging.ERROR):
        response = alice.client().get("/api/v1/boom")
    body = assert_error_envelope(response, 500)
    assert body["error"]["message"] == MSG_INTERNAL
    assert "secret-internal-detail" not in response.content.decode()
    assert "secret-internal-detail" in caplog.text  # the details go to the logs only


@pytest.mark.urls("tests.urls_boom")
@pytest.mark.django_db
def test_unexpected_exception_outside_drf_is_500_envelope():
    response = Client(raise_request_exception=False).get("/api/v1/plain-boom")
    assert_error_envelope(response, 500)
    assert "secret-internal-detail" not in response.content.decode()


@pytest.mark.django_db
def test_non_api_404_stays_html():
    response = Client().get("/definitely-not-here")
    assert response.status_code == 404
    assert "application/json" not in response["Content-Type"]


def test_no_free_database_connection_is_a_503_with_retry_after_not_a_500():
    from django.db import OperationalError

    from gateway.errors import MSG_DATABASE_BUSY, api_exception_handler

    response = api_exception_handler(OperationalError("couldn't get a connection after 10.00 sec"), {})
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.data["error"] == {"code": 503, "message": MSG_DATABASE_BUSY}
