"""PUT /plugins/defaults and its OpenAPI schema agree (issue 28, item 7): what the validation refuses (an empty or
unknown plugin id, a field the plugin does not have, a field the body does not take) the schema refuses too, and a
body the schema takes is taken. The doors' `plugins` arrays carry their validation's bound in the schema too."""

import pytest
from django.test import Client
from jsonschema import Draft7Validator

from responses_api.validation.limits import MAX_PLUGINS
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


def test_the_doors_plugins_arrays_have_the_bound_of_their_validation(alice, standin_catalog):
    schemas = Client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    for request in ("ResponseCreateRequest", "ChatCompletionCreateRequest", "MessageCreateRequest"):
        assert schemas[request]["properties"]["plugins"]["maxItems"] == MAX_PLUGINS, request
    plugins = [{"id": "response-healing"}] * (MAX_PLUGINS + 1)
    body = {"model": "standin/echo", "input": "Hi", "plugins": plugins}
    response = alice.client().post("/api/v1/responses", body, format="json")
    assert "plugins" in assert_error_envelope(response, 400)["error"]["metadata"]["fields"]
