"""/messages and its OpenAPI schema agree on `thinking` (issue 28, item 7: the schema fuzz test's coverage phase sent
`{"type": "enabled"}`, which the schema allowed and the validation refused): enabled thinking needs its budget."""

import pytest
from django.test import Client
from jsonschema import Draft7Validator

from tests.frontdoors.test_messages import post as post_message
from tests.frontdoors.test_redteam_doors import MESSAGE, anthropic_error


@pytest.fixture(scope="module")
def thinking_schema(django_db_setup, django_db_blocker) -> Draft7Validator:
    with django_db_blocker.unblock():
        document = Client().get("/api/v1/openapi.json").json()
    return Draft7Validator({"$ref": "#/components/schemas/AnthropicThinking", "components": document["components"]})


def test_enabled_thinking_without_a_budget_is_refused_by_both(alice, standin_catalog, thinking_schema):
    thinking = {"type": "enabled"}
    assert "thinking.budget_tokens" in anthropic_error(post_message(alice, {**MESSAGE, "thinking": thinking}), 400)
    assert not thinking_schema.is_valid(thinking)


@pytest.mark.parametrize("thinking", [{"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}])
def test_thinking_the_schema_takes_is_taken(alice, standin_catalog, thinking_schema, thinking):
    assert thinking_schema.is_valid(thinking)
    response = post_message(alice, {**MESSAGE, "max_tokens": 2048, "thinking": thinking})
    assert response.status_code == 200, response.content
