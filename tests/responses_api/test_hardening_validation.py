"""Hostile input is a 4xx naming the field, never a 500, a hang or a silent coercion (issue 9, items 9-12).

Through the real stack: DRF views, the JSON parser, PostgreSQL; and raw HTTP against a live gunicorn for
what only the wire can carry (control characters in paths).
"""

import http.client
import json
from decimal import Decimal

import pytest

from gateway.parsers import json_depth
from responses_api.validation.limits import MAX_CONTENT_PARTS, MAX_INPUT_ITEMS, MAX_JSON_DEPTH, MAX_TOOLS
from tests.support import assert_error_envelope

BASE = {"model": "standin/echo", "input": "Hi"}
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def post_raw(client, path: str, raw: bytes, method: str = "post"):
    return getattr(client, method)(path, data=raw, content_type="application/json")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def fields_of(response, status: int = 400) -> dict:
    return assert_error_envelope(response, status)["error"].get("metadata", {}).get("fields", {})


# --- 9. nesting -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,field",
    [
        ("post", "/api/v1/responses", "input"),
        ("patch", "/api/v1/routing/settings", "allowed_providers"),
        ("post", "/api/v1/byok", "key"),
        ("post", "/api/v1/keys", "name"),
    ],
)
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
def test_nesting_beyond_the_limit_is_400_on_every_json_endpoint(alice, method, path, field, depth):
    client = alice.client(management=not path.endswith("responses"))
    raw = b'{"' + field.encode() + b'": ' + nested(depth - 1) + b"}"
    body = assert_error_envelope(post_raw(client, path, raw, method), 400)
    assert (
        body["error"]["message"] == f"JSON body is nested too deeply: at most {MAX_JSON_DEPTH} levels of "
        "arrays and objects"
    )


def test_nesting_at_the_limit_is_parsed(alice):
    parameters = {"type": "object"}
    for _ in range((MAX_JSON_DEPTH - 6) // 2):
        parameters = {"type": "object", "properties": {"x": parameters}}
    raw = json.dumps(
        {**BASE, "model": "no/such-model", "tools": [{"type": "function", "name": "f", "parameters": parameters}]}
    ).encode()
    assert json_depth(raw) <= MAX_JSON_DEPTH
    assert_error_envelope(post_raw(alice.client(), "/api/v1/responses", raw), 404)  # validated, then routed


def test_depth_counts_brackets_outside_strings_only():
    assert json_depth(b'{"a": "[[[[[[{{{{", "b": ["\\"[[[["]}') == 2
    assert json_depth(b'"just a string"') == 0 and json_depth(b"[[],[[]]]") == 3


# --- 12. strict JSON types and finite numbers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "a/b", "input": "Hi", "temperature": NaN}',
        b'{"model": "a/b", "input": "Hi", "temperature": Infinity}',
        b'{"model": "a/b", "input": "Hi", "temperature": -Infinity}',
        b'{"model": "a/b", "input": "Hi", "temperature": 1e309}',
        b'{"model": "a/b", "input": "Hi", "provider": {"preferred_min_throughput": 1e309}}',
        b'{"model": "a/b", "input": "\\ud800"}',
    ],
)
def test_non_finite_numbers_and_unpaired_surrogates_are_refused_at_parse_time(alice, raw):
    body = assert_error_envelope(post_raw(alice.client(), "/api/v1/responses", raw), 400)
    assert body["error"]["message"].startswith("Malformed JSON body")


RESPONSES_WRONG_TYPES = [
    ("stream", "yes"),
    ("stream", "true"),
    ("stream", "on"),
    ("stream", 1),
    ("stream", "1"),
    ("temperature", True),
    ("temperature", "0.5"),
    ("max_output_tokens", "16"),
    ("max_output_tokens", 1e2),
    ("max_output_tokens", True),
    ("instructions", 123),
    ("session_id", 123),
    ("user", ["u"]),
    ("metadata", {"k": 1}),
    ("metadata", {"k": True}),
    ("parallel_tool_calls", "yes"),
    ("top_k", 1.5),
    ("model", 5),
    ("models", "a/b"),
    ("provider", {"allow_fallbacks": "yes"}),
    ("provider", {"zdr": 0}),
    ("provider", {"order": "openai"}),
    ("provider", {"preferred_min_throughput": {"p50": "10"}}),
    ("provider", {"preferred_max_latency": True}),
    ("provider", {"max_price": {"prompt": "1"}}),
    ("reasoning", {"max_tokens": "100"}),
    ("text", {"format": {"type": "json_schema", "name": "x", "schema": {}, "strict": "yes"}}),
    ("tools", [{"type": "function", "name": "f", "strict": "true"}]),
    ("tools", [{"type": "function", "name": "f", "defer_loading": 1}]),
    ("tools", [{"type": ["function"], "name": "f"}]),
    ("input", [{"type": {"a": 1}, "role": "user", "content": "x"}]),
    ("input", [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]),
    ("input", [{"type": "function_call", "call_id": 5, "name": "f", "arguments": "{}"}]),
    ("plugins", [{"id": ["web"]}]),
    ("plugins", [{"id": "web", "enabled": "false"}]),
    ("plugins", [{"id": "web", "max_results": "5"}]),
]


@pytest.mark.parametrize("field,value", RESPONSES_WRONG_TYPES, ids=[f"{f}={v!r}" for f, v in RESPONSES_WRONG_TYPES])
def test_responses_take_json_types_as_sent(alice, field, value):
    response = alice.client().post("/api/v1/responses", {**BASE, field: value}, format="json")
    fields = fields_of(response)
    assert any(name == field or name.startswith((f"{field}.", f"{field}[")) for name in fields), fields


MANAGEMENT_WRONG_TYPES = [
    ("patch", "/api/v1/routing/settings", {"enforce_zdr": "yes"}, "enforce_zdr"),
    ("patch", "/api/v1/routing/settings", {"enforce_zdr": 0}, "enforce_zdr"),
    ("patch", "/api/v1/routing/settings", {"data_collection": 1}, "data_collection"),
    ("patch", "/api/v1/routing/settings", {"allowed_providers": [1]}, "allowed_providers[0]"),
    ("post", "/api/v1/byok", {"provider": "openai", "key": "sk-x", "disabled": "yes"}, "disabled"),
    ("post", "/api/v1/byok", {"provider": "openai", "key": "sk-x", "is_fallback": 1}, "is_fallback"),
    ("post", "/api/v1/byok", {"provider": "openai", "key": "sk-x", "name": 5}, "name"),
    ("post", "/api/v1/byok", {"provider": "openai", "key": "sk-x", "workspace_id": ""}, "workspace_id"),
    ("post", "/api/v1/byok", {"provider": "openai", "key": "sk-x", "workspace_id": 5}, "workspace_id"),
    ("post", "/api/v1/byok", {"provider": 5, "key": "sk-x"}, "provider"),
    ("post", "/api/v1/keys", {"name": 5}, "name"),
    ("post", "/api/v1/keys", {"name": ""}, "name"),
    ("post", "/api/v1/keys", {"name": "k", "limit": "5"}, "limit"),
    ("post", "/api/v1/keys", {"name": "k", "limit": True}, "limit"),
    ("post", "/api/v1/keys", {"name": "k", "limit": 1e30}, "limit"),
    ("post", "/api/v1/keys", {"name": "k", "include_byok_in_limit": "true"}, "include_byok_in_limit"),
    ("post", "/api/v1/keys", {"name": "k", "workspace_id": ""}, "workspace_id"),
    ("post", "/api/v1/keys", {"name": "k", "expires_at": 1893456000}, "expires_at"),
    ("post", "/api/v1/keys", {"name": "k", "creator_user_id": 7}, "creator_user_id"),
]


@pytest.mark.parametrize(
    "method,path,payload,field",
    MANAGEMENT_WRONG_TYPES,
    ids=[f"{p}:{f}={b[f]!r}" if f in b else p for _, p, b, f in MANAGEMENT_WRONG_TYPES],
)
def test_management_endpoints_take_json_types_as_sent(alice, providers, method, path, payload, field):
    response = getattr(alice.client(management=True), method)(path, payload, format="json")
    assert field in fields_of(response)


def test_byok_patch_is_strict_too(alice, providers):
    client = alice.client(management=True)
    created = client.post("/api/v1/byok", {"provider": "openai", "key": "sk-test-1234567890"}, format="json")
    assert created.status_code == 201, created.content
    path = f"/api/v1/byok/{created.json()['data']['id']}"
    assert_error_envelope(post_raw(client, path, b'{"key": ' + nested(MAX_JSON_DEPTH) + b"}", "patch"), 400)
    for payload, field in [
        ({"disabled": "true"}, "disabled"),
        ({"sort_order": "1"}, "sort_order"),
        ({"sort_order": 2**63}, "sort_order"),
        ({"is_fallback": 0}, "is_fallback"),
    ]:
        assert field in fields_of(client.patch(path, payload, format="json"))
    assert client.patch(path, {"disabled": True, "sort_order": 0}, format="json").status_code == 200


@pytest.mark.parametrize("limit", [-9223372036854775809, -1e20, -1, -0.5, 1e300])
def test_an_out_of_range_key_limit_is_400_not_500(alice, limit):
    """A negative limit with more digits than the decimal context holds overflowed quantize() (500) before the
    minimum was checked."""
    client = alice.client(management=True)
    assert "limit" in fields_of(client.post("/api/v1/keys", {"name": "k", "limit": limit}, format="json"))
    created = client.post("/api/v1/keys", {"name": "k2"}, format="json").json()["data"]["hash"]
    assert "limit" in fields_of(client.patch(f"/api/v1/keys/{created}", {"limit": limit}, format="json"))


def test_a_valid_key_limit_is_a_json_number(alice):
    created = alice.client(management=True).post("/api/v1/keys", {"name": " spaced ", "limit": 2.5}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["data"]["limit"] == 2.5 and created.json()["data"]["name"] == " spaced "


# --- 10. bounded integers, query parameters, control characters in paths -----------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_output_tokens", 9223372036854775808),
        ("max_output_tokens", 2**31),
        ("top_k", 10**30),
        ("reasoning", {"max_tokens": 2**40}),
        ("plugins", [{"id": "web-fetch", "max_content_tokens": 2**31}]),
    ],
)
def test_integers_are_bounded_before_they_reach_the_database(alice, field, value):
    response = alice.client().post("/api/v1/responses", {**BASE, field: value}, format="json")
    fields = fields_of(response)
    assert any(name.startswith(field) for name in fields), fields


def test_the_largest_max_output_tokens_passes_validation(alice):
    response = alice.client().post(
        "/api/v1/responses", {**BASE, "model": "no/such-model", "max_output_tokens": 2**31 - 1}, format="json"
    )
    assert_error_envelope(response, 404)


@pytest.mark.parametrize("path", ["/api/v1/keys", "/api/v1/byok", "/api/v1/models"])
@pytest.mark.parametrize(
    "query,field",
    [
        ("offset=10000000000000000000", "offset"),
        ("limit=99999999999999999999", "limit"),
        ("offset=-1", "offset"),
        ("offset=1e2", "offset"),
        ("limit=", "limit"),
        ("offset=%00", "offset"),
        ("limit=1.0", "limit"),
    ],
)
def test_list_paging_parameters_are_bounded(alice, path, query, field):
    assert field in fields_of(alice.client(management=True).get(f"{path}?{query}"))


@pytest.mark.parametrize(
    "path,query,field",
    [
        ("/api/v1/keys", "include_disabled=yes", "include_disabled"),
        ("/api/v1/keys", "workspace_id=", "workspace_id"),
        ("/api/v1/byok", "workspace_id=", "workspace_id"),
        ("/api/v1/byok", "provider=", "provider"),
        ("/api/v1/byok", "provider=a%00b", "provider"),
        ("/api/v1/models", "supported_parameters=", "supported_parameters"),
        ("/api/v1/models", "q=%00", "q"),
        ("/api/v1/generation", "id=", "id"),
    ],
)
def test_blank_and_nul_query_parameters_are_400(alice, path, query, field):
    assert field in fields_of(alice.client(management=True).get(f"{path}?{query}"))


def test_paging_within_bounds_still_works(alice):
    client = alice.client(management=True)
    assert client.get("/api/v1/keys?offset=0&limit=1&include_disabled=false").status_code == 200
    assert client.get("/api/v1/byok?offset=2147483647&limit=1000").json()["data"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/keys/a%00b",
        "/api/v1/keys/a%01b",
        "/api/v1/keys/%7f",
        "/api/v1/models/a%00/b/endpoints",
        "/api/v1/models/a/b%0a/endpoints",
        "/api/v1/byok/a%00b",
        f"/api/v1/byok/{ZERO_UUID}%00",
    ],
)
def test_control_characters_in_path_parameters_are_404(alice, path):
    assert_error_envelope(alice.client(management=True).get(path), 404)


@pytest.mark.live
def test_control_characters_in_paths_over_the_wire(live_gateway, transactional_db):
    from gateway.billing.provisioning import account_provision

    key = account_provision(name="wire", plan="payg", credits=Decimal("1")).management_key.plaintext
    for path in ("/api/v1/keys/a%00b", "/api/v1/models/a%00/b/endpoints", "/api/v1/byok/%00", "/api/v1/keys/%1b%5b31m"):
        connection = http.client.HTTPConnection("127.0.0.1", live_gateway.port, timeout=10)
        connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status in (400, 404), (path, response.status, body)
        assert json.loads(body)["error"]["code"] in (400, 404)


# --- 11. count limits before the expensive work ---------------------------------------------------------------


def test_too_many_input_items_are_refused_before_any_item_is_validated(alice):
    garbage = [{"role": "robot"}] * (MAX_INPUT_ITEMS + 1)  # every item invalid: only the count is reported
    fields = fields_of(alice.client().post("/api/v1/responses", {**BASE, "input": garbage}, format="json"))
    assert fields == {"input": f"at most {MAX_INPUT_ITEMS} input items (got {MAX_INPUT_ITEMS + 1})"}


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"tools": [{"type": "function", "name": f"f{i}"} for i in range(MAX_TOOLS + 1)]}, "tools"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}] * (MAX_CONTENT_PARTS + 1)}]},
            "input[0].content",
        ),
        ({"plugins": [{"id": "web"}] * 17}, "plugins"),
        ({"metadata": {f"k{i}": "v" for i in range(100_000)}}, "metadata"),
        ({"tool_choice": {"type": "allowed_tools", "tools": [{}] * (MAX_TOOLS + 1)}}, "tool_choice"),
    ],
)
def test_count_limits(alice, patch, field):
    assert field in fields_of(alice.client().post("/api/v1/responses", {**BASE, **patch}, format="json"))


def test_requests_at_the_count_limits_are_valid(alice):
    body = {
        **BASE,
        "model": "no/such-model",
        "input": [{"role": "user", "content": "hi"}] * (MAX_INPUT_ITEMS - 1)
        + [{"role": "user", "content": [{"type": "input_text", "text": "x"}] * MAX_CONTENT_PARTS}],
        "tools": [{"type": "function", "name": f"f{i}", "parameters": {"type": "object"}} for i in range(MAX_TOOLS)],
    }
    assert_error_envelope(alice.client().post("/api/v1/responses", body, format="json"), 404)


def test_errors_in_many_items_are_reported_briefly(alice):
    garbage = [{"role": "robot", "content": "x"}] * 500
    fields = fields_of(alice.client().post("/api/v1/responses", {**BASE, "input": garbage}, format="json"))
    assert len(fields) == 20 and "input[0].role" in fields and "input[19].role" in fields


# --- the schema says what the validation does -----------------------------------------------------------------


def test_schema_documents_the_limits_and_non_blank_strings(alice):
    schema = alice.client().get("/api/v1/openapi.json").json()
    components = schema["components"]["schemas"]
    request = components["ResponseCreateRequest"]
    assert request["properties"]["input"]["oneOf"][1]["maxItems"] == MAX_INPUT_ITEMS
    assert request["properties"]["tools"]["maxItems"] == MAX_TOOLS
    assert request["properties"]["max_output_tokens"]["maximum"] == 2**31 - 1
    assert request["anyOf"] == [{"required": ["model"]}, {"required": ["models"]}]
    assert components["ApiKeyCreateRequest"]["properties"]["name"]["minLength"] == 1
    assert components["ApiKeyCreateRequest"]["properties"]["limit"]["type"] == "number"
    models = {p["name"]: p["schema"] for p in schema["paths"]["/models"]["get"]["parameters"]}
    assert models["supported_parameters"]["minLength"] == 1 and models["limit"]["maximum"] == 1000
