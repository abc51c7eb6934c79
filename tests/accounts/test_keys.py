"""API keys: generation, hashing, masking, the /keys management API and cross-account isolation."""

import hashlib
import re
from decimal import Decimal

from gateway.accounts.keys import KEY_PREFIX, key_generate, key_hash, key_mask
from gateway.accounts.models import ApiKey, Member
from gateway.billing.services import credits_reserve, credits_settle
from tests.support import assert_error_envelope


def test_generated_keys_have_prefix_kind_and_256_bits():
    keys = {key_generate(kind="inference") for _ in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert re.fullmatch(r"sk-gw-v1-inf-[A-Za-z0-9_-]{43}", key)
    assert key_generate(kind="management").startswith(KEY_PREFIX + "mgmt-")


def test_hash_is_sha256_hex_and_mask_hides_the_secret():
    key = key_generate(kind="inference")
    assert key_hash(key) == hashlib.sha256(key.encode()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", key_hash(key))
    label = key_mask(key)
    assert label.startswith("sk-gw-v1-inf-...") and label.endswith(key[-3:])
    secret = key.removeprefix("sk-gw-v1-inf-")
    assert secret[:-3] not in label


def test_only_the_hash_is_stored(alice):
    for key in ApiKey.objects.filter(account_id=alice.account_id):
        for field in key._meta.concrete_fields:
            value = str(getattr(key, field.attname))
            assert alice.api_key not in value and alice.management_key not in value
    assert ApiKey.objects.filter(hash=key_hash(alice.api_key)).exists()


def test_create_returns_plaintext_once_then_only_metadata(alice):
    client = alice.client(management=True)
    created = client.post("/api/v1/keys", {"name": "ci", "limit": 5, "limit_reset": "daily"}, format="json")
    assert created.status_code == 201, created.content
    plaintext, record = created.json()["key"], created.json()["data"]
    assert record["hash"] == key_hash(plaintext)
    assert record["label"] == key_mask(plaintext)
    assert record["limit"] == 5 and record["limit_remaining"] == 5 and record["limit_reset"] == "daily"

    fetched = client.get(f"/api/v1/keys/{record['hash']}")
    assert fetched.status_code == 200
    assert "key" not in fetched.json()
    assert plaintext not in fetched.content.decode()
    listed = client.get("/api/v1/keys").content.decode()
    assert plaintext not in listed and record["hash"] in listed


def test_created_key_authenticates_as_inference_key(alice):
    plaintext = alice.client(management=True).post("/api/v1/keys", {"name": "new"}, format="json").json()["key"]
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    me = client.get("/api/v1/key").json()["data"]
    assert me["is_management_key"] is False and me["usage"] == 0


def test_patch_updates_and_disables(alice):
    client = alice.client(management=True)
    record = client.post("/api/v1/keys", {"name": "a"}, format="json").json()["data"]
    patched = client.patch(
        f"/api/v1/keys/{record['hash']}", {"name": "b", "disabled": True, "limit": None}, format="json"
    ).json()["data"]
    assert patched["name"] == "b" and patched["disabled"] is True and patched["limit"] is None


def test_delete_removes_the_key(alice):
    client = alice.client(management=True)
    record = client.post("/api/v1/keys", {"name": "gone"}, format="json").json()["data"]
    assert client.delete(f"/api/v1/keys/{record['hash']}").json() == {"deleted": True}
    assert_error_envelope(client.get(f"/api/v1/keys/{record['hash']}"), 404)


def test_list_paginates_and_filters_by_workspace(alice):
    client = alice.client(management=True)
    for index in range(3):
        client.post("/api/v1/keys", {"name": f"k{index}"}, format="json")
    page = client.get("/api/v1/keys", {"offset": 1, "limit": 2}).json()
    assert page["total_count"] == 5 and len(page["data"]) == 2
    workspace = str(alice.provisioned.workspace_id)
    assert client.get("/api/v1/keys", {"workspace_id": workspace}).json()["total_count"] == 5
    other = "00000000-0000-0000-0000-000000000000"
    assert client.get("/api/v1/keys", {"workspace_id": other}).json()["total_count"] == 0


def test_validation_errors_name_the_field(alice):
    client = alice.client(management=True)
    body = assert_error_envelope(
        client.post("/api/v1/keys", {"limit": -1, "limit_reset": "hourly"}, format="json"), 400
    )
    fields = body["error"]["metadata"]["fields"]
    assert set(fields) == {"name", "limit", "limit_reset"}
    assert "limit_reset" in body["error"]["message"]
    body = assert_error_envelope(client.get("/api/v1/keys", {"limit": 0}), 400)
    assert "limit" in body["error"]["metadata"]["fields"]


def test_creator_must_be_a_member_and_workspace_must_be_own(alice, bob_other_account):
    client = alice.client(management=True)
    body = assert_error_envelope(
        client.post("/api/v1/keys", {"name": "x", "creator_user_id": "ghost"}, format="json"), 400
    )
    assert "creator_user_id" in body["error"]["message"]
    Member.objects.create(account_id=alice.account_id, user_id="user_alice")
    ok = client.post("/api/v1/keys", {"name": "x", "creator_user_id": "user_alice"}, format="json")
    assert ok.json()["data"]["creator_user_id"] == "user_alice"
    bobs_workspace = str(bob_other_account.provisioned.workspace_id)
    assert_error_envelope(
        client.post("/api/v1/keys", {"name": "x", "workspace_id": bobs_workspace}, format="json"), 400
    )


def test_other_accounts_keys_are_invisible(alice, bob_other_account):
    bobs_hash = bob_other_account.provisioned.inference_key.key.hash
    client = alice.client(management=True)
    assert_error_envelope(client.get(f"/api/v1/keys/{bobs_hash}"), 404)
    assert_error_envelope(client.patch(f"/api/v1/keys/{bobs_hash}", {"disabled": True}, format="json"), 404)
    assert_error_envelope(client.delete(f"/api/v1/keys/{bobs_hash}"), 404)
    assert bobs_hash not in client.get("/api/v1/keys").content.decode()
    assert ApiKey.objects.get(hash=bobs_hash).disabled is False


def test_usage_windows_and_limit_remaining_follow_the_ledger(alice):
    key = alice.provisioned.inference_key.key
    ApiKey.objects.filter(pk=key.pk).update(limit=Decimal("1"), limit_reset="monthly")
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("0.5"), api_key_id=key.pk)
    credits_settle(reservation=reservation, cost=Decimal("0.25"))
    me = alice.client().get("/api/v1/key").json()["data"]
    assert me["usage"] == me["usage_daily"] == me["usage_weekly"] == me["usage_monthly"] == 0.25
    assert me["limit_remaining"] == 0.75 and me["byok_usage"] == 0
