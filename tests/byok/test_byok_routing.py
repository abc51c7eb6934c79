"""BYOK routing with the stand-in provider checking which credential reached the upstream: prioritized keys
in order, failing key -> next key -> shared -> fallback keys, shared-capacity levels, filters, provider.order
with partial BYOK, data policies, the fee and free allowance, no plaintext anywhere, and key rotation."""

import base64
import json
import logging
from decimal import Decimal

from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from byok.models import ByokKey
from gateway.accounts.models import Member
from gateway.accounts.services import api_key_create
from gateway.billing.fees import BYOK_MONTHLY_ALLOWANCE
from gateway.billing.models import EntryKind, Generation, LedgerEntry
from routing.models import Provider
from tests.support import PROVIDERS, Persona, assert_error_envelope, point


def add_key(persona: Persona, provider: str, key: str, **fields) -> dict:
    response = persona.client(management=True).post(
        "/api/v1/byok", {"provider": provider, "key": key, **fields}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()["data"]


def ask(persona: Persona, *, api_key: str | None = None, **body):
    client = persona.client()
    if api_key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client.post(
        "/api/v1/responses",
        {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}, **body},
        format="json",
    )


def attempts(response) -> list[tuple]:
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    return [(a["provider_name"], a["status"], a["is_byok"]) for a in generation.provider_responses]


def credentials_seen(server) -> list[str]:
    return [r["credential"] for r in server.requests_for("/chat/completions")]


def test_prioritized_keys_in_order_then_shared_then_fallback(alice, multi):
    add_key(alice, "alpha", "byok-alpha-1")
    add_key(alice, "alpha", "byok-alpha-2")
    add_key(alice, "alpha", "byok-alpha-fb", is_fallback=True)
    # The first prioritized key works: it serves.
    response = ask(alice)
    assert response.json()["usage"]["is_byok"] is True and credentials_seen(multi) == ["byok-alpha-1"]
    # Key 1 is rejected: key 2 serves.
    multi.clear()
    point(multi, "alpha", "key=byok-alpha-2")
    response = ask(alice)
    assert credentials_seen(multi) == ["byok-alpha-1", "byok-alpha-2"]
    assert attempts(response) == [("alpha", 401, True), ("alpha", 200, True)]
    # Both prioritized keys fail: shared capacity (the operator's key) serves, charged normally.
    multi.clear()
    point(multi, "alpha", "key=sk-alpha")
    response = ask(alice)
    assert credentials_seen(multi) == ["byok-alpha-1", "byok-alpha-2", "sk-alpha"]
    assert response.json()["usage"]["is_byok"] is False
    # Everything before it fails: the fallback key serves last.
    multi.clear()
    point(multi, "alpha", "key=byok-alpha-fb")
    response = ask(alice)
    assert credentials_seen(multi) == ["byok-alpha-1", "byok-alpha-2", "sk-alpha", "byok-alpha-fb"]
    assert attempts(response)[-1] == ("alpha", 200, True)


def test_shared_capacity_levels(alice, multi):
    point(multi, "alpha", "key=sk-alpha")  # only the operator's key works on alpha
    never = add_key(alice, "alpha", "byok-never", shared_capacity="never")
    body = assert_error_envelope(ask(alice), 502)  # the key fails; shared is never tried
    assert credentials_seen(multi) == ["byok-never"]
    assert body["error"]["metadata"]["provider_name"] == "alpha"
    # Other providers can still serve unless restricted.
    multi.clear()
    assert ask(alice, provider={"order": ["alpha", "beta"]}).status_code == 200
    assert credentials_seen(multi) == ["byok-never", "sk-beta"]
    # outside_filter: models the key covers never fall back to shared on alpha; other models may.
    alice.client(management=True).patch(
        f"/api/v1/byok/{never['id']}",
        {"shared_capacity": "outside_filter", "allowed_models": ["multi/model"]},
        format="json",
    )
    multi.clear()
    assert_error_envelope(ask(alice), 502)
    assert credentials_seen(multi) == ["byok-never"]
    from routing.services import catalog_load

    catalog_load(
        data={
            "models": [
                {
                    "id": "multi/other",
                    "name": "Other",
                    "context_length": 8000,
                    "endpoints": [
                        {"provider": "alpha", "upstream_model": "other", "pricing": {"prompt": 1, "completion": 1}}
                    ],
                }
            ]
        }
    )
    multi.clear()
    assert ask(alice, model="multi/other").status_code == 200
    assert credentials_seen(multi) == ["sk-alpha"]  # the key's filter excludes this model; shared is allowed
    # always (the default): key first, then shared.
    alice.client(management=True).patch(f"/api/v1/byok/{never['id']}", {"shared_capacity": "always"}, format="json")
    multi.clear()
    assert ask(alice).status_code == 200 and credentials_seen(multi) == ["byok-never", "sk-alpha"]


def test_filters_by_model_api_key_and_member(alice, multi):
    Member.objects.create(account_id=alice.account_id, user_id="user_7")
    member_key = api_key_create(account_id=alice.account_id, name="member's", creator_user_id="user_7")
    add_key(alice, "alpha", "byok-for-member", allowed_user_ids=["user_7"])
    add_key(alice, "alpha", "byok-for-key", allowed_api_key_hashes=[alice.provisioned.inference_key.key.hash])
    from routing.services import catalog_load

    catalog_load(
        data={
            "models": [
                {
                    "id": "multi/other",
                    "name": "Other",
                    "context_length": 8000,
                    "endpoints": [
                        {"provider": "alpha", "upstream_model": "other", "pricing": {"prompt": 1, "completion": 1}}
                    ],
                }
            ]
        }
    )
    add_key(alice, "alpha", "byok-for-other-model", allowed_models=["multi/other"])
    ask(alice)  # alice's own key, no member: only the API-key-filtered key applies
    assert credentials_seen(multi) == ["byok-for-key"]
    multi.clear()
    ask(alice, api_key=member_key.plaintext)  # the member's key: only the member-filtered key applies
    assert credentials_seen(multi) == ["byok-for-member"]
    multi.clear()
    ask(alice, model="multi/other")
    assert credentials_seen(multi) == ["byok-for-key"]  # first in order among those that apply
    multi.clear()
    point(multi, "alpha", "key=byok-for-other-model")
    ask(alice, model="multi/other")
    assert credentials_seen(multi) == ["byok-for-key", "byok-for-other-model"]


def test_provider_order_with_partial_byok(alice, multi):
    add_key(alice, "beta", "byok-beta")
    for slug in ("alpha", "beta"):
        point(multi, slug, "status=500")
    ask(alice, provider={"order": ["alpha", "beta"], "allow_fallbacks": False})
    assert credentials_seen(multi) == ["byok-beta", "sk-alpha", "sk-beta"]


def test_data_policies_apply_before_byok(alice, multi):
    add_key(alice, "beta", "byok-beta")  # beta retains prompts and is not ZDR
    response = ask(alice, provider={"zdr": True, "only": ["beta"]})
    body = assert_error_envelope(response, 404)
    assert body["error"]["metadata"]["availability"]["code"] == "constraint_filtered"
    assert credentials_seen(multi) == []
    assert ask(alice, provider={"zdr": True, "order": ["beta", "alpha"]}).status_code == 200
    assert credentials_seen(multi) == ["sk-alpha"]


def test_fee_and_free_allowance(alice, multi):
    add_key(alice, "alpha", "byok-alpha")
    # Within the monthly allowance: no fee.
    first = ask(alice)
    generation = Generation.objects.get(pk=first["X-Generation-Id"])
    assert generation.is_byok and generation.cost == 0 and generation.upstream_cost > 0
    assert not LedgerEntry.objects.filter(generation_id=generation.pk, kind=EntryKind.CHARGE).exists()
    # The month's BYOK list cost reaches the allowance: 5% of the list cost from then on.
    Generation.objects.create(
        id="gen-history",
        account_id=alice.account_id,
        requested_model="multi/model",
        is_byok=True,
        upstream_cost=BYOK_MONTHLY_ALLOWANCE["payg"],
    )
    second = ask(alice)
    generation = Generation.objects.get(pk=second["X-Generation-Id"])
    assert generation.cost == (generation.upstream_cost * Decimal("0.05"))
    charge = LedgerEntry.objects.get(generation_id=generation.pk, kind=EntryKind.CHARGE)
    assert -charge.amount == generation.cost and charge.is_byok
    assert second.json()["usage"]["cost"] == float(generation.cost)
    # A shared-capacity fallback is charged at the list price.
    point(multi, "alpha", "key=sk-alpha")
    third = ask(alice)
    generation = Generation.objects.get(pk=third["X-Generation-Id"])
    assert not generation.is_byok and generation.cost == generation.upstream_cost


def test_byok_metadata(alice, multi):
    add_key(alice, "alpha", "byok-alpha")
    body = ask(alice).json()
    assert body["usage"]["is_byok"] is True
    response = alice.client().post(
        "/api/v1/responses",
        {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}},
        format="json",
        HTTP_X_GATEWAY_METADATA="enabled",
    )
    assert response.json()["gateway_metadata"]["is_byok"] is True


SENTINEL = "sk-SENTINEL-7f3a9c2e5b1d-DO-NOT-LEAK"


def test_no_plaintext_in_responses_logs_or_database(alice, multi, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    seen = []
    created = alice.client(management=True).post("/api/v1/byok", {"provider": "alpha", "key": SENTINEL}, format="json")
    seen.append(created.content)
    record = created.json()["data"]
    client = alice.client()
    for body in ({}, {"stream": True, "debug": {"echo_upstream_body": True}}):
        response = client.post(
            "/api/v1/responses",
            {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}, **body},
            format="json",
        )
        seen.append(b"".join(response.streaming_content) if response.streaming else response.content)
        seen.append(json.dumps(dict(response.headers)).encode())
    point(multi, "alpha", "status=401")
    seen.append(
        client.post(
            "/api/v1/responses",
            {"model": "multi/model", "input": "Hi", "provider": {"only": ["alpha"]}},
            format="json",
            HTTP_X_GATEWAY_METADATA="enabled",
        ).content
    )
    management = alice.client(management=True)
    seen += [
        management.get("/api/v1/byok").content,
        management.get(f"/api/v1/byok/{record['id']}").content,
        management.patch(f"/api/v1/byok/{record['id']}", {"name": "x"}, format="json").content,
    ]
    assert SENTINEL in credentials_seen(multi)[0], "the key did reach the provider"
    for blob in seen:
        assert SENTINEL.encode() not in blob
        assert b"SENTINEL" not in blob
    captured = capfd.readouterr()
    assert "SENTINEL" not in caplog.text + captured.out + captured.err
    assert not database_contains("SENTINEL")


def database_contains(needle: str) -> bool:
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 (table names come from introspection)
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, memoryview | bytes):
                        value = bytes(value).decode("latin-1")
                    if needle in str(value):
                        return True
    return False


KEY_A = "a:" + base64.urlsafe_b64encode(b"A" * 32).decode()
KEY_B = "b:" + base64.urlsafe_b64encode(b"B" * 32).decode()


def test_key_rotation(alice, multi):
    with override_settings(GATEWAY_ENCRYPTION_KEYS=KEY_A):
        from routing.services import provider_credential_set

        for provider in Provider.objects.filter(slug__in=PROVIDERS):
            provider_credential_set(provider=provider, plaintext=f"sk-{provider.slug}")
        add_key(alice, "alpha", "byok-alpha-rotating")
        assert set(ByokKey.objects.values_list("key_id", flat=True)) == {"a"}
    with override_settings(GATEWAY_ENCRYPTION_KEYS=f"{KEY_B},{KEY_A}"):
        call_command("rotate_secrets", stdout=open("/dev/null", "w"))  # noqa: SIM115
        assert set(ByokKey.objects.values_list("key_id", flat=True)) == {"b"}
        assert set(Provider.objects.filter(slug__in=PROVIDERS).values_list("credential_key_id", flat=True)) == {"b"}
    with override_settings(GATEWAY_ENCRYPTION_KEYS=KEY_B):  # the old key is gone
        multi.clear()
        assert ask(alice).status_code == 200
        point(multi, "alpha", "key=sk-alpha")
        assert ask(alice).status_code == 200
        assert credentials_seen(multi) == ["byok-alpha-rotating", "byok-alpha-rotating", "sk-alpha"]


def test_staff_see_masked_keys_and_disable_them(alice, multi):
    from django.contrib.auth.models import User
    from django.test import Client

    record = add_key(alice, "alpha", SENTINEL)
    User.objects.create_superuser("staff", "s@example.com", "pw")
    staff = Client()
    staff.login(username="staff", password="pw")
    page = staff.get(f"/admin/byok/byokkey/{record['id']}/change/").content.decode()
    assert record["label"] in page and "SENTINEL" not in page
    assert "SENTINEL" not in staff.get("/admin/byok/byokkey/").content.decode()
    key = ByokKey.objects.get(pk=record["id"])
    response = staff.post(
        f"/admin/byok/byokkey/{record['id']}/change/",
        {
            "name": "",
            "disabled": "on",
            "sort_order": key.sort_order,
            "shared_capacity": "always",
            "allowed_models": "null",
            "allowed_api_key_hashes": "null",
            "allowed_user_ids": "null",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ByokKey.objects.get(pk=record["id"]).disabled
    multi.clear()
    assert ask(alice).status_code == 200 and credentials_seen(multi) == ["sk-alpha"]  # the disabled key is skipped
