"""The management API's bodies refuse a field they do not take (400 naming it) instead of dropping it, and the
OpenAPI document says so (`additionalProperties: false`), so schema and validation agree (issue 28, item 7; the
guardrail bodies: tests/guardrails/test_api_unknown_fields.py). A misspelt `limit` made a key without a limit."""

import pytest
from django.test import Client

from byok.models import ByokKey
from gateway.accounts.models import ApiKey
from routing.models import AccountRoutingSettings
from tests.support import assert_error_envelope

CLOSED_REQUESTS = (
    "ApiKeyCreateRequest",
    "PatchedApiKeyUpdateRequest",
    "ByokCreateRequest",
    "PatchedByokUpdateRequest",
    "PatchedAccountRoutingSettings",
    "PluginDefaultsUpdateRequest",
)
OPENAI_KEY = {"provider": "openai", "key": "sk-proj-abcdefghijklmnop"}


def refused_fields(response) -> dict:
    return assert_error_envelope(response, 400)["error"]["metadata"]["fields"]


def test_a_key_with_a_misspelt_limit_is_400_and_not_made(alice):
    client = alice.client(management=True)
    keys = ApiKey.objects.count()
    assert "limt" in refused_fields(client.post("/api/v1/keys", {"name": "ci", "limt": 5}, format="json"))
    assert ApiKey.objects.count() == keys
    made = client.post("/api/v1/keys", {"name": "ci", "limit": 5}, format="json").json()["data"]
    response = client.patch(f"/api/v1/keys/{made['hash']}", {"disabled": True, "hash": "x"}, format="json")
    assert "hash" in refused_fields(response)
    assert not ApiKey.objects.get(hash=made["hash"]).disabled


def test_a_byok_key_with_a_field_it_does_not_take_is_400_and_changes_nothing(alice, providers):
    client = alice.client(management=True)
    assert "region" in refused_fields(client.post("/api/v1/byok", {**OPENAI_KEY, "region": "eu"}, format="json"))
    assert not ByokKey.objects.exists()
    made = client.post("/api/v1/byok", OPENAI_KEY, format="json").json()["data"]
    response = client.patch(f"/api/v1/byok/{made['id']}", {"disabled": True, "provider": "azure"}, format="json")
    assert "provider" in refused_fields(response)
    assert not ByokKey.objects.get().disabled


def test_routing_settings_with_a_field_they_do_not_take_are_400_and_unchanged(alice, providers):
    client = alice.client(management=True)
    body = {"enforce_zdr": True, "only": ["openai"]}
    assert "only" in refused_fields(client.patch("/api/v1/routing/settings", body, format="json"))
    assert not AccountRoutingSettings.objects.filter(account_id=alice.account_id, enforce_zdr=True).exists()


@pytest.mark.django_db
def test_the_schema_says_the_management_requests_take_no_other_field():
    schemas = Client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert {name: schemas[name].get("additionalProperties") for name in CLOSED_REQUESTS} == dict.fromkeys(
        CLOSED_REQUESTS, False
    )
