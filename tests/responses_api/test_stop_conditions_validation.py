"""`stop_server_tools_when` refuses every malformed condition with a 400 naming the field, never a 500 (issue 28,
item 7: a condition whose `type` was an array or an object raised `TypeError: unhashable type`)."""

import pytest

from tests.support import assert_error_envelope

BASE = {"model": "standin/echo", "input": "Hi", "tools": [{"type": "gateway:datetime"}]}


@pytest.mark.parametrize(
    "conditions",
    [
        [{"type": []}],
        [{"type": {}}],
        [{"type": {}, "reason": "0"}],
        [{"type": ["step_count_is"], "step_count": 1}],
        [{"type": None}],
        [{"type": 1.5}],
        [{}],
        [[]],
        ["step_count_is"],
        [{"type": "step_count_is", "step_count": 1}, {"type": [1, 2]}],
        [{"type": "step_count_is", "step_count": []}],
        [{"type": "max_cost", "max_cost_in_dollars": {}}],
        [{"type": "has_tool_call", "tool_name": ["x"]}],
        {"type": "step_count_is", "step_count": 1},
        "step_count_is",
    ],
    ids=[
        "type-array",
        "type-object",
        "type-object-with-field",
        "type-array-of-a-valid-type",
        "type-null",
        "type-number",
        "empty-object",
        "array-not-object",
        "string-not-object",
        "second-of-two",
        "field-array",
        "field-object",
        "field-array-of-strings",
        "object-not-array",
        "string-not-array",
    ],
)
def test_malformed_stop_conditions_are_400_naming_the_field(alice, standin_catalog, conditions):
    client = alice.client()
    client.raise_request_exception = False  # a server error must show as the 500 a caller would get, not raise
    response = client.post("/api/v1/responses", {**BASE, "stop_server_tools_when": conditions}, format="json")
    body = assert_error_envelope(response, 400)
    fields = body["error"]["metadata"]["fields"]
    assert fields and all(path.startswith("stop_server_tools_when") for path in fields), body


def test_a_valid_condition_is_accepted(alice, standin_catalog):
    conditions = [{"type": "step_count_is", "step_count": 1}, {"type": "finish_reason_is", "reason": "stop"}]
    response = alice.client().post("/api/v1/responses", {**BASE, "stop_server_tools_when": conditions}, format="json")
    assert response.status_code == 200, response.content
