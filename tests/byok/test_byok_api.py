"""The /byok management API: every validation rule with its status, PATCH semantics, ordering, masking and
isolation."""

import json

import pytest

from byok.models import ByokKey
from gateway.accounts.models import ApiKey, Member
from tests.support import DEPLOYMENT, SERVICE_ACCOUNT, assert_error_envelope


def create(client, **body):
    return client.post("/api/v1/byok", {"provider": "openai", "key": "sk-proj-abcdefghijklmnop", **body}, format="json")


def test_create_get_list_delete(alice, providers):
    client = alice.client(management=True)
    created = create(client, name="main")
    assert created.status_code == 201
    record = created.json()["data"]
    assert set(record) == {
        "id",
        "provider",
        "workspace_id",
        "label",
        "name",
        "disabled",
        "is_fallback",
        "allowed_models",
        "allowed_api_key_hashes",
        "allowed_user_ids",
        "sort_order",
        "shared_capacity",
        "is_byok_only",
        "is_required",
        "declared_region",
        "declared_zdr",
        "created_at",
    }
    assert record["label"] == "sk-p...mnop" and record["allowed_models"] is None and record["sort_order"] == 0
    assert record["workspace_id"] == str(alice.provisioned.workspace_id)
    assert "abcdefghijkl" not in created.content.decode()
    assert client.get(f"/api/v1/byok/{record['id']}").json() == {"data": record}
    listed = client.get("/api/v1/byok", {"provider": "openai"}).json()
    assert listed["total_count"] == 1 and listed["data"] == [record]
    assert client.get("/api/v1/byok", {"provider": "azure"}).json()["total_count"] == 0
    assert client.delete(f"/api/v1/byok/{record['id']}").json() == {"deleted": True}
    assert_error_envelope(client.get(f"/api/v1/byok/{record['id']}"), 404)


def test_management_key_required(alice, providers):
    body = assert_error_envelope(create(alice.client()), 403)
    assert body["error"]["message"] == "Only management keys can perform this operation"
    assert_error_envelope(alice.client().get("/api/v1/byok"), 403)


def test_unknown_provider_and_workspace(alice, bob_other_account, providers):
    client = alice.client(management=True)
    assert "provider" in assert_error_envelope(create(client, provider="nope"), 400)["error"]["message"]
    bobs_workspace = str(bob_other_account.provisioned.workspace_id)
    assert_error_envelope(create(client, workspace_id=bobs_workspace), 400)


@pytest.mark.parametrize(
    "hashes,why",
    [
        ("abc", "array"),
        ([], "empty"),
        (["A" * 64], "uppercase"),
        (["a" * 63], "too short"),
        (["g" * 64], "not hex"),
        ([7], "not a string"),
        (["a" * 64], "unknown key"),
    ],
)
def test_allowed_api_key_hashes_rules(alice, providers, hashes, why):
    body = assert_error_envelope(create(alice.client(management=True), allowed_api_key_hashes=hashes), 400)
    assert "allowed_api_key_hashes" in body["error"]["metadata"]["fields"], why


def test_allowed_api_key_hashes_limits_and_ownership(alice, bob_other_account, providers):
    client = alice.client(management=True)
    bobs = bob_other_account.provisioned.inference_key.key.hash
    assert_error_envelope(create(client, allowed_api_key_hashes=[bobs]), 400)
    too_many = [f"{i:064x}" for i in range(101)]
    assert_error_envelope(create(client, allowed_api_key_hashes=too_many), 400)
    ApiKey.objects.filter(hash=alice.provisioned.management_key.key.hash)  # a live key of alice's
    own = alice.provisioned.inference_key.key.hash
    created = create(client, allowed_api_key_hashes=[own])
    assert created.status_code == 201 and created.json()["data"]["allowed_api_key_hashes"] == [own]
    ApiKey.objects.filter(hash=own).update(disabled=True)
    assert_error_envelope(create(client, allowed_api_key_hashes=[own]), 400)  # not live any more


def test_model_and_member_filters(alice, providers):
    client = alice.client(management=True)
    assert_error_envelope(create(client, allowed_models=["openai/unknown"]), 400)
    assert_error_envelope(create(client, allowed_models=["not a model id"]), 400)
    assert_error_envelope(create(client, allowed_user_ids=["stranger"]), 400)
    assert_error_envelope(create(client, allowed_models=[]), 400)
    assert_error_envelope(create(client, allowed_user_ids=["u"] * 101), 400)
    Member.objects.create(account_id=alice.account_id, user_id="user_1")
    created = create(client, allowed_models=["openai/gpt-4o"], allowed_user_ids=["user_1"])
    assert created.status_code == 201
    assert created.json()["data"]["allowed_user_ids"] == ["user_1"]


def test_patch_omitted_null_array(alice, providers):
    client = alice.client(management=True)
    Member.objects.create(account_id=alice.account_id, user_id="user_1")
    own = alice.provisioned.inference_key.key.hash
    record = create(client, allowed_models=["openai/gpt-4o"], allowed_api_key_hashes=[own]).json()["data"]
    url = f"/api/v1/byok/{record['id']}"
    kept = client.patch(url, {"name": "renamed"}, format="json").json()["data"]
    assert kept["allowed_models"] == ["openai/gpt-4o"] and kept["allowed_api_key_hashes"] == [own]
    cleared = client.patch(url, {"allowed_models": None}, format="json").json()["data"]
    assert cleared["allowed_models"] is None and cleared["allowed_api_key_hashes"] == [own]
    replaced = client.patch(
        url, {"allowed_user_ids": ["user_1"], "allowed_api_key_hashes": None}, format="json"
    ).json()["data"]
    assert replaced["allowed_user_ids"] == ["user_1"] and replaced["allowed_api_key_hashes"] is None
    assert_error_envelope(client.patch(url, {"allowed_api_key_hashes": []}, format="json"), 400)


def test_patch_rotates_the_key_in_place(alice, providers):
    client = alice.client(management=True)
    record = create(client).json()["data"]
    before = ByokKey.objects.get(pk=record["id"]).sealed
    rotated = client.patch(f"/api/v1/byok/{record['id']}", {"key": "sk-proj-zyxwvutsrq987654"}, format="json").json()[
        "data"
    ]
    assert rotated["id"] == record["id"] and rotated["label"] == "sk-p...7654"
    assert bytes(ByokKey.objects.get(pk=record["id"]).sealed) != bytes(before)
    assert_error_envelope(client.patch(f"/api/v1/byok/{record['id']}", {"key": ""}, format="json"), 400)


def test_sort_order_within_a_section(alice, providers):
    client = alice.client(management=True)
    ids = [create(client, name=f"k{i}").json()["data"]["id"] for i in range(3)]
    fallback = create(client, name="fb", is_fallback=True).json()["data"]
    assert fallback["sort_order"] == 0

    def order():
        return [r["name"] for r in client.get("/api/v1/byok").json()["data"] if not r["is_fallback"]]

    assert order() == ["k0", "k1", "k2"]
    moved = client.patch(f"/api/v1/byok/{ids[2]}", {"sort_order": 0}, format="json").json()["data"]
    assert moved["sort_order"] == 0 and order() == ["k2", "k0", "k1"]
    client.patch(f"/api/v1/byok/{ids[2]}", {"is_fallback": True}, format="json")
    assert order() == ["k0", "k1"]
    fallbacks = [(r["name"], r["sort_order"]) for r in client.get("/api/v1/byok").json()["data"] if r["is_fallback"]]
    assert fallbacks == [("fb", 0), ("k2", 1)]
    client.delete(f"/api/v1/byok/{ids[0]}")
    assert [
        (r["name"], r["sort_order"]) for r in client.get("/api/v1/byok").json()["data"] if not r["is_fallback"]
    ] == [("k1", 0)]


def test_other_accounts_keys_are_404(alice, bob_other_account, providers):
    record = create(alice.client(management=True)).json()["data"]
    bob = bob_other_account.client(management=True)
    for method in ("get", "delete"):
        assert_error_envelope(getattr(bob, method)(f"/api/v1/byok/{record['id']}"), 404)
    assert_error_envelope(bob.patch(f"/api/v1/byok/{record['id']}", {"disabled": True}, format="json"), 404)
    assert bob.get("/api/v1/byok").json()["total_count"] == 0
    assert ByokKey.objects.get(pk=record["id"]).disabled is False


# ---- credential shapes ---------------------------------------------------------------------------

GOOD = [
    ("openai", "sk-plain-key-1234567890"),
    ("azure", [DEPLOYMENT]),
    ("azure", json.dumps([{"api_key": "azure-catalog-key-123", "resource_name": "acme-ai"}, DEPLOYMENT])),
    ("azure", [{"api_key": "k" * 20, "resource_name": "acme", "resource_type": "ai_foundry"}]),
    ("amazon-bedrock", "bedrock-api-key-abcdefghij"),
    ("amazon-bedrock", {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "s" * 40, "region": "us-east-1"}),
    ("google-vertex", SERVICE_ACCOUNT),
    ("google-vertex", json.dumps({**SERVICE_ACCOUNT, "region": "global", "bucket": "gs://my-bucket"})),
    ("google-vertex", {**SERVICE_ACCOUNT, "region": "europe-west4", "bucket": "my-bucket"}),
]


@pytest.mark.parametrize("provider,key", GOOD)
def test_good_credential_shapes(alice, providers, provider, key):
    response = create(alice.client(management=True), provider=provider, key=key)
    assert response.status_code == 201, response.content
    secret_bits = ["azure-secret-key-1", "s" * 30, "MIIEv", "plain-key-12"]
    assert not any(bit in response.content.decode() for bit in secret_bits)


BAD = [
    ("openai", "", "non-empty string"),
    ("openai", "has space inside", "whitespace"),
    ("openai", {"a": 1}, "non-empty string"),
    ("azure", "not json", "array of Azure configs"),
    ("azure", [], "at least one"),
    ("azure", ["x"], "key[0] must be an object"),
    ("azure", [{"api_key": "k"}], "needs resource_name"),
    ("azure", [{"api_key": "k", "resource_name": "a", "endpoint_url": "https://x"}], "mixes"),
    ("azure", [{"api_key": "k", "resource_name": "acme", "resource_type": "cloud"}], "resource_type"),
    ("azure", [{"resource_name": "acme"}], "key[0].api_key is required"),
    ("azure", [{"api_key": "k", "resource_name": "bad name!"}], "subdomain"),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": "http://acme.openai.azure.com/x/chat/completions?api-version=1"}],
        "https",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": "https://acme.openai.azure.com/openai/deployments/x?api-version=1"}],
        "/chat/completions",
    ),
    ("azure", [{**DEPLOYMENT, "endpoint_url": "https://acme.openai.azure.com/d/x/chat/completions"}], "api-version"),
    ("azure", [{**DEPLOYMENT, "model_slug": "gpt-4o"}], "model_slug"),
    *[
        (
            "azure",
            [{**DEPLOYMENT, "endpoint_url": f"https://{host}/openai/deployments/x/chat/completions?api-version=1"}],
            "public address",
        )
        for host in (
            "127.0.0.1",
            "127.1",
            "0x7f000001",
            "2130706433",
            "localhost",
            "api.localhost",
            "10.0.0.5",
            "169.254.169.254",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[64:ff9b::a9fe:a9fe]",
            "[fd00:ec2::254]",
        )
    ],
    ("azure", [{**DEPLOYMENT, "extra": 1}], "unknown fields"),
    ("amazon-bedrock", {"accessKeyId": "nope", "secretAccessKey": "s" * 40, "region": "us-east-1"}, "accessKeyId"),
    (
        "amazon-bedrock",
        {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "short", "region": "us-east-1"},
        "too short",
    ),
    (
        "amazon-bedrock",
        {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "s" * 40, "region": "mars"},
        "region",
    ),
    ("amazon-bedrock", {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "s" * 40}, "region is required"),
    (
        "amazon-bedrock",
        {
            "accessKeyId": "AKIAABCDEFGHIJKLMNOP",
            "secretAccessKey": "s" * 40,
            "region": "us-east-1",
            "sessionToken": "x",
        },
        "unknown fields",
    ),
    ("google-vertex", "{}", "key.type is required"),
    ("google-vertex", {**SERVICE_ACCOUNT, "type": "user"}, "service_account"),
    ("google-vertex", {**SERVICE_ACCOUNT, "private_key": "abc"}, "PEM"),
    ("google-vertex", {**SERVICE_ACCOUNT, "client_email": "nope"}, "client_email"),
    ("google-vertex", {**SERVICE_ACCOUNT, "region": "moon"}, "region"),
    ("google-vertex", {**SERVICE_ACCOUNT, "bucket": "gs://my-bucket/some/object"}, "object path"),
    ("google-vertex", {**SERVICE_ACCOUNT, "bucket": "my-bucket/obj"}, "object path"),
    ("google-vertex", {**SERVICE_ACCOUNT, "bucket": "B"}, "bucket"),
    ("google-vertex", {k: v for k, v in SERVICE_ACCOUNT.items() if k != "private_key_id"}, "private_key_id"),
]


@pytest.mark.parametrize("provider,key,message", BAD)
def test_bad_credential_shapes(alice, providers, provider, key, message):
    body = assert_error_envelope(create(alice.client(management=True), provider=provider, key=key), 400)
    assert message in body["error"]["message"], body["error"]["message"]
    assert body["error"]["message"].startswith("key")
