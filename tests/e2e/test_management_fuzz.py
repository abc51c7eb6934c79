"""Any JSON body on the management endpoints answers 2xx or a 4xx in the error envelope, never a 500."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import assert_error_envelope

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=80)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
KEY_FIELDS = [
    "name",
    "limit",
    "limit_reset",
    "include_byok_in_limit",
    "expires_at",
    "creator_user_id",
    "workspace_id",
    "disabled",
]
BYOK_FIELDS = [
    "provider",
    "key",
    "name",
    "disabled",
    "is_fallback",
    "workspace_id",
    "shared_capacity",
    "is_byok_only",
    "is_required",
    "declared_region",
    "declared_zdr",
    "allowed_models",
    "allowed_api_key_hashes",
    "allowed_user_ids",
    "sort_order",
]
ROUTING_FIELDS = ["allowed_providers", "ignored_providers", "enforce_zdr", "data_collection"]


def body(fields):
    return st.dictionaries(st.sampled_from(fields), values, max_size=5)


def check(response):
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert_error_envelope(response, response.status_code)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(payload=body(KEY_FIELDS))
def test_keys(alice, payload):
    client = alice.client(management=True)
    check(client.post("/api/v1/keys", payload, format="json"))
    check(client.patch(f"/api/v1/keys/{alice.provisioned.inference_key.key.hash}", payload, format="json"))


@SETTINGS
@given(payload=body(BYOK_FIELDS))
def test_byok(alice, payload):
    client = alice.client(management=True)
    check(client.post("/api/v1/byok", payload, format="json"))
    check(client.patch("/api/v1/byok/00000000-0000-0000-0000-000000000000", payload, format="json"))


@SETTINGS
@given(payload=body(ROUTING_FIELDS))
def test_routing_settings(alice, payload):
    check(alice.client(management=True).patch("/api/v1/routing/settings", payload, format="json"))


@SETTINGS
@given(
    query=st.dictionaries(
        st.sampled_from(
            [
                "offset",
                "limit",
                "q",
                "supported_parameters",
                "providers",
                "workspace_id",
                "provider",
                "id",
                "include_disabled",
            ]
        ),
        st.text(max_size=20),
        max_size=4,
    )
)
def test_query_strings(alice, query):
    for path in ("/api/v1/models", "/api/v1/keys", "/api/v1/byok", "/api/v1/generation"):
        check(alice.client(management=True).get(path, query))
