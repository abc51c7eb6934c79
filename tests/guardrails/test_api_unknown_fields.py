"""The /guardrails bodies refuse a field they do not take (400 naming it) instead of dropping it, and the
OpenAPI document says so (`additionalProperties: false`), so schema and validation agree (issue 28, item 7):
a misspelt `limit_usd` made a guardrail without a budget."""

import pytest
from django.test import Client

from guardrails.models import Guardrail
from tests.support import assert_error_envelope

CLOSED_REQUESTS = (
    "GuardrailCreateRequest",
    "PatchedGuardrailUpdateRequest",
    "ContentFilter",
    "BuiltinFilter",
    "KeyHashesRequest",
    "MemberUserIdsRequest",
)


def refused_fields(response) -> dict:
    return assert_error_envelope(response, 400)["error"]["metadata"]["fields"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"name": "team", "limit_usdd": 1}, "limit_usdd"),
        (
            {"name": "team", "content_filters": [{"pattern": "a", "action": "block", "lable": "x"}]},
            "content_filters[0].lable",
        ),
        (
            {"name": "team", "content_filter_builtins": [{"slug": "email", "action": "block", "x": 1}]},
            "content_filter_builtins[0].x",
        ),
        ({"name": "team", "id": "00000000-0000-0000-0000-000000000000"}, "id"),
    ],
    ids=["misspelt-budget", "content-filter", "builtin-filter", "read-only-field"],
)
def test_create_with_a_field_it_does_not_take_is_400_and_creates_nothing(alice, providers, body, field):
    response = alice.client(management=True).post("/api/v1/guardrails", body, format="json")
    assert field in refused_fields(response)
    assert not Guardrail.objects.exists()


def test_patch_with_a_field_it_does_not_take_is_400_and_changes_nothing(alice, providers):
    client = alice.client(management=True)
    record = client.post("/api/v1/guardrails", {"name": "team", "limit_usd": 5}, format="json").json()["data"]
    response = client.patch(f"/api/v1/guardrails/{record['id']}", {"limit_usd": 1, "reset": "daily"}, format="json")
    assert "reset" in refused_fields(response)
    assert Guardrail.objects.get().limit_usd == 5


@pytest.mark.parametrize("kind,field", [("keys", "key_hashes"), ("members", "member_user_ids")])
def test_assignments_with_a_field_they_do_not_take_are_400(alice, providers, kind, field):
    client = alice.client(management=True)
    record = client.post("/api/v1/guardrails", {"name": "team"}, format="json").json()["data"]
    for path in (f"assignments/{kind}", f"assignments/{kind}/remove"):
        response = client.post(f"/api/v1/guardrails/{record['id']}/{path}", {field: [], "all": True}, format="json")
        assert "all" in refused_fields(response)


def test_the_schema_says_the_guardrail_requests_take_no_other_field(db):
    schemas = Client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert {name: schemas[name].get("additionalProperties") for name in CLOSED_REQUESTS} == dict.fromkeys(
        CLOSED_REQUESTS, False
    )
