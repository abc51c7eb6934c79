"""PUT /plugins/defaults and its OpenAPI schema agree (issue 28, item 7): what the validation refuses (an empty or
unknown plugin id, a field the plugin does not have, a field the body does not take) the schema refuses too, and a
body the schema takes is taken."""

import pytest
from django.test import Client
from jsonschema import Draft7Validator

from tests.support import assert_error_envelope

REFUSED = [
    {"plugins": [{"id": ""}]},
    {"plugins": [{"id": "web-search"}]},
    {"plugins": [{"id": "web", "max_resluts": 3}]},
    {"plugins": [{"id": "file-parser", "pdf": {"engine": "native", "pages": 3}}]},
    {"plugins": [], "replace": True},
]
TAKEN = [
    {"plugins": []},
    {"plugins": [{"id": "response-healing"}, {"id": "file-parser", "enabled": False, "pdf": {"engine": "native"}}]},
]


@pytest.fixture(scope="module")
def request_schema(django_db_setup, django_db_blocker) -> Draft7Validator:
    with django_db_blocker.unblock():
        document = Client().get("/api/v1/openapi.json").json()
    ref = {"$ref": "#/components/schemas/PluginDefaultsUpdateRequest", "components": document["components"]}
    return Draft7Validator(ref)


@pytest.mark.parametrize("body", REFUSED, ids=["empty-id", "unknown-id", "unknown-option", "nested", "top-level"])
def test_what_the_validation_refuses_the_schema_refuses(alice, request_schema, body):
    response = alice.client(management=True).put("/api/v1/plugins/defaults", body, format="json")
    assert_error_envelope(response, 400)
    assert not request_schema.is_valid(body)


@pytest.mark.parametrize("body", TAKEN, ids=["none", "two"])
def test_what_the_schema_takes_the_validation_takes(alice, request_schema, body):
    assert request_schema.is_valid(body)
    response = alice.client(management=True).put("/api/v1/plugins/defaults", body, format="json")
    assert response.status_code == 200, response.content
