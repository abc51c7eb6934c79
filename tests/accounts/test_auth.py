"""The 401/403 matrix for bearer API keys."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from gateway.accounts.models import ApiKey
from gateway.errors import MSG_INVALID_KEY, MSG_MANAGEMENT_ONLY, MSG_MISSING_AUTH
from tests.support import assert_error_envelope

MANAGEMENT_PATHS = ["/api/v1/keys", "/api/v1/credits"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", [*MANAGEMENT_PATHS, "/api/v1/key"])
def test_missing_authorization_is_401(path):
    body = assert_error_envelope(APIClient().get(path), 401)
    assert body["error"]["message"] == MSG_MISSING_AUTH


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-gateway-key",
        "Bearer sk-gw-v1-inf-" + "x" * 43,  # right shape, unknown key
        "Bearer sk-gw-v1-inf-" + "x" * 300,  # absurdly long
    ],
)
def test_malformed_or_unknown_key_is_401(header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    body = assert_error_envelope(client.get("/api/v1/key"), 401)
    assert body["error"]["message"] == MSG_INVALID_KEY
    assert "xxxx" not in body["error"]["message"]


def test_disabled_key_is_401(alice):
    ApiKey.objects.filter(account_id=alice.account_id).update(disabled=True)
    assert_error_envelope(alice.client().get("/api/v1/key"), 401)


def test_expired_key_is_401(alice):
    ApiKey.objects.filter(account_id=alice.account_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    body = assert_error_envelope(alice.client(management=True).get("/api/v1/credits"), 401)
    assert "expired" in body["error"]["message"]


def test_key_expiring_later_still_works(alice):
    ApiKey.objects.filter(account_id=alice.account_id).update(expires_at=timezone.now() + timedelta(hours=1))
    assert alice.client().get("/api/v1/key").status_code == 200


@pytest.mark.parametrize("path", MANAGEMENT_PATHS)
def test_inference_key_on_management_operation_is_403(alice, path):
    body = assert_error_envelope(alice.client().get(path), 403)
    assert body["error"]["message"] == MSG_MANAGEMENT_ONLY


def test_inference_key_cannot_create_keys(alice):
    body = assert_error_envelope(alice.client().post("/api/v1/keys", {"name": "x"}, format="json"), 403)
    assert body["error"]["message"] == MSG_MANAGEMENT_ONLY


@pytest.mark.parametrize("path", MANAGEMENT_PATHS)
def test_management_key_on_management_operation_is_200(alice, path):
    assert alice.client(management=True).get(path).status_code == 200


def test_both_key_kinds_read_their_own_metadata(alice):
    inference = alice.client().get("/api/v1/key").json()["data"]
    management = alice.client(management=True).get("/api/v1/key").json()["data"]
    assert inference["is_management_key"] is False
    assert management["is_management_key"] is True
    assert inference["label"] != management["label"]
