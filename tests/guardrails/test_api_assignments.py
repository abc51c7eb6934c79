"""Assignments of guardrails to keys and members through the API (one guardrail per key and per member;
assigning moves), what `guardrails_for_caller` then answers (and how soon after a change), and the
current-period spend and reset time a record shows."""

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.utils import timezone

from gateway.accounts.models import ApiKey, Member, Workspace
from gateway.accounts.services import api_key_create
from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from gateway.versions.models import Version
from guardrails.models import Guardrail, GuardrailKeyAssignment, GuardrailMemberAssignment
from guardrails.selectors import guardrail_usage, guardrails_for_caller, period_bounds
from guardrails.services import guardrail_create, guardrail_keys_assign, guardrail_update
from tests.support import Persona, assert_error_envelope


def create(client, name: str = "team", **body) -> str:
    response = client.post("/api/v1/guardrails", {"name": name, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["data"]["id"]


def new_key(persona, name: str, creator: str | None = None) -> ApiKey:
    return api_key_create(account_id=persona.account_id, name=name, creator_user_id=creator).key


def assign_keys(client, guardrail_id: str, hashes, remove: bool = False):
    suffix = "/remove" if remove else ""
    return client.post(
        f"/api/v1/guardrails/{guardrail_id}/assignments/keys{suffix}", {"key_hashes": hashes}, format="json"
    )


def assign_members(client, guardrail_id: str, user_ids, remove: bool = False):
    suffix = "/remove" if remove else ""
    return client.post(
        f"/api/v1/guardrails/{guardrail_id}/assignments/members{suffix}", {"member_user_ids": user_ids}, format="json"
    )


def test_keys_assigned_listed_moved_and_removed(alice, providers):
    client = alice.client(management=True)
    first, second = create(client, "first"), create(client, "second")
    one, two = new_key(alice, "one"), new_key(alice, "two")
    assigned = assign_keys(client, first, [one.hash, two.hash, one.hash])
    assert assigned.status_code == 200 and assigned.json() == {"assigned_count": 2}
    listed = client.get(f"/api/v1/guardrails/{first}/assignments/keys").json()
    assert listed["total_count"] == 2
    assert listed["data"][0]["key_hash"] == one.hash and listed["data"][0]["guardrail_id"] == first
    assert set(listed["data"][0]) == {
        "id",
        "guardrail_id",
        "key_hash",
        "key_name",
        "key_label",
        "assigned_by",
        "created_at",
    }
    assert (listed["data"][0]["key_name"], listed["data"][0]["key_label"]) == ("one", one.label)

    moved = assign_keys(client, second, [one.hash])
    assert moved.json() == {"assigned_count": 1}
    assert GuardrailKeyAssignment.objects.get(api_key=one).guardrail_id.hex == second.replace("-", "")
    assert client.get(f"/api/v1/guardrails/{first}/assignments/keys").json()["total_count"] == 1
    everything = client.get("/api/v1/guardrails/assignments/keys").json()
    assert {(r["key_hash"], r["guardrail_id"]) for r in everything["data"]} == {(one.hash, second), (two.hash, first)}

    removed = assign_keys(client, first, [one.hash, two.hash], remove=True)  # `one` is on `second`: left alone
    assert removed.status_code == 200 and removed.json() == {"unassigned_count": 1}
    assert list(GuardrailKeyAssignment.objects.values_list("api_key__name", flat=True)) == ["one"]


@pytest.mark.parametrize(
    "hashes,why",
    [
        ([], "empty"),
        ("a" * 64, "not an array"),
        (None, "null"),
        (["A" * 64], "uppercase"),
        (["a" * 63], "too short"),
        ([7], "not a string"),
        (["a" * 64], "unknown key"),
        ([f"{i:064x}" for i in range(1001)], "too many"),
    ],
)
def test_key_hashes_refused(alice, providers, hashes, why):
    client = alice.client(management=True)
    guardrail = create(client)
    for remove in (False, True):
        body = assert_error_envelope(assign_keys(client, guardrail, hashes, remove=remove), 400)
        assert all(name.startswith("key_hashes") for name in body["error"]["metadata"]["fields"]), why
    assert not GuardrailKeyAssignment.objects.exists()


def test_another_accounts_key_or_a_disabled_key_is_400(alice, bob_other_account, providers):
    client = alice.client(management=True)
    guardrail = create(client)
    own = alice.provisioned.inference_key.key.hash
    bobs = bob_other_account.provisioned.inference_key.key.hash
    body = assert_error_envelope(assign_keys(client, guardrail, [own, bobs]), 400)
    assert "1 hash(es) do not belong to a live API key of this account" in body["error"]["message"]
    assert_error_envelope(assign_keys(client, guardrail, [bobs], remove=True), 400)
    assert not GuardrailKeyAssignment.objects.exists()
    assert assign_keys(client, guardrail, [own]).status_code == 200
    ApiKey.objects.filter(hash=own).update(disabled=True)
    assert_error_envelope(assign_keys(client, guardrail, [own]), 400)  # assigning takes live keys only
    assert assign_keys(client, guardrail, [own], remove=True).json() == {"unassigned_count": 1}  # removing: any


def test_members_assigned_moved_removed_and_refused(alice, bob_other_account, providers):
    client = alice.client(management=True)
    first, second = create(client, "first"), create(client, "second")
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    Member.objects.create(account_id=alice.account_id, user_id="user_b")
    Member.objects.create(account_id=bob_other_account.account_id, user_id="user_bob")
    assert assign_members(client, first, ["user_a", "user_b"]).json() == {"assigned_count": 2}
    assert assign_members(client, second, ["user_b"]).json() == {"assigned_count": 1}
    listed = client.get(f"/api/v1/guardrails/{first}/assignments/members").json()
    assert listed["total_count"] == 1 and listed["data"][0]["user_id"] == "user_a"
    assert set(listed["data"][0]) == {"id", "guardrail_id", "user_id", "assigned_by", "created_at"}
    everything = client.get("/api/v1/guardrails/assignments/members").json()
    assert {(r["user_id"], r["guardrail_id"]) for r in everything["data"]} == {("user_a", first), ("user_b", second)}
    for bad in (["user_bob"], ["stranger"], [], [5], "user_a", ["u" * 257]):
        for remove in (False, True):
            body = assert_error_envelope(assign_members(client, first, bad, remove=remove), 400)
            assert all(name.startswith("member_user_ids") for name in body["error"]["metadata"]["fields"]), bad
    assert assign_members(client, first, ["user_a", "user_b"], remove=True).json() == {"unassigned_count": 1}
    assert list(GuardrailMemberAssignment.objects.values_list("member__user_id", flat=True)) == ["user_b"]


def test_assignment_listings_paginate_and_stay_in_the_account(alice, bob_other_account, providers):
    client = alice.client(management=True)
    guardrail = create(client)
    keys = [new_key(alice, f"k{i}") for i in range(3)]
    assign_keys(client, guardrail, [k.hash for k in keys])
    bobs_client = bob_other_account.client(management=True)
    assign_keys(bobs_client, create(bobs_client), [bob_other_account.provisioned.inference_key.key.hash])
    page = client.get("/api/v1/guardrails/assignments/keys", {"offset": 1, "limit": 1}).json()
    assert page["total_count"] == 3 and [r["key_name"] for r in page["data"]] == ["k1"]
    assert bobs_client.get("/api/v1/guardrails/assignments/keys").json()["total_count"] == 1
    assert bobs_client.get("/api/v1/guardrails/assignments/members").json() == {"data": [], "total_count": 0}
    for url in ("/api/v1/guardrails/assignments/keys", f"/api/v1/guardrails/{guardrail}/assignments/members"):
        assert_error_envelope(client.get(url, {"limit": 0}), 400)


def test_deleting_a_guardrail_removes_its_assignments(alice, providers):
    client = alice.client(management=True)
    guardrail = create(client)
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    assign_keys(client, guardrail, [alice.provisioned.inference_key.key.hash])
    assign_members(client, guardrail, ["user_a"])
    assert client.delete(f"/api/v1/guardrails/{guardrail}").status_code == 200
    assert not GuardrailKeyAssignment.objects.exists() and not GuardrailMemberAssignment.objects.exists()


# ---- what applies to a caller ---------------------------------------------------------------------------


def rules_for(persona, key: ApiKey, user_id: str | None = None):
    return guardrails_for_caller(
        account_id=persona.account_id, workspace_id=key.workspace_id, key_hash=key.hash, user_id=user_id
    )


def test_key_member_and_workspace_default_scopes(alice, providers):
    client = alice.client(management=True)
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    key = new_key(alice, "mine", creator="user_a")
    assert rules_for(alice, key, "user_a") == []  # nothing assigned, no default: nothing applies
    create(client, "default", is_workspace_default=True, enforce_zdr=True)
    assert [(r.name, r.scope, r.enforce_zdr) for r in rules_for(alice, key, "user_a")] == [
        ("default", "workspace", True)
    ]
    by_member = create(client, "member", content_filters=[{"pattern": "x+", "action": "redact", "label": "x"}])
    assign_members(client, by_member, ["user_a"])
    rules = rules_for(alice, key, "user_a")
    assert [(r.name, r.scope) for r in rules] == [("member", "member")]  # the default no longer applies
    assert rules[0].policy_inputs() == ([{"pattern": "x+", "action": "redact", "label": "x"}], [])
    by_key = create(client, "key", limit_usd=1.5, reset_interval="daily", allowed_models=["openai/*"])
    assign_keys(client, by_key, [key.hash])
    rules = rules_for(alice, key, "user_a")
    assert [(r.name, r.scope) for r in rules] == [("key", "key"), ("member", "member")]
    assert (rules[0].limit_usd, rules[0].reset_interval, rules[0].allowed_models) == (
        Decimal("1.5"),
        "daily",
        ("openai/*",),
    )
    assert [r.scope for r in rules_for(alice, key, None)] == ["key"]  # a key without a creator: no member rule
    assert [r.scope for r in rules_for(alice, alice.provisioned.inference_key.key, None)] == ["workspace"]


def test_the_same_guardrail_on_key_and_member_comes_once_per_scope(alice, providers):
    client = alice.client(management=True)
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    key = new_key(alice, "mine", creator="user_a")
    both = create(client, "both", limit_usd=3)
    assign_keys(client, both, [key.hash])
    assign_members(client, both, ["user_a"])
    assert [(r.name, r.scope) for r in rules_for(alice, key, "user_a")] == [("both", "key"), ("both", "member")]


def test_another_accounts_ids_never_match(alice, bob_other_account, providers):
    client = alice.client(management=True)
    guardrail = create(client, is_workspace_default=True)
    assign_keys(client, guardrail, [alice.provisioned.inference_key.key.hash])
    bobs_key = bob_other_account.provisioned.inference_key.key
    assert rules_for(bob_other_account, bobs_key) == []
    # alice's key hash under bob's account (as a forged caller would look) finds nothing either
    assert (
        guardrails_for_caller(
            account_id=bob_other_account.account_id,
            workspace_id=bobs_key.workspace_id,
            key_hash=alice.provisioned.inference_key.key.hash,
            user_id=None,
        )
        == []
    )


def test_changes_apply_at_once_here_and_after_the_version_check_elsewhere(
    alice, providers, settings, django_assert_num_queries
):
    settings.CACHE_VERSION_CHECK_SECONDS = 3600  # the counters are read once, then trusted
    client = alice.client(management=True)
    key = alice.provisioned.inference_key.key
    guardrail = create(client, "g", enforce_zdr=False)
    assign_keys(client, guardrail, [key.hash])
    assert rules_for(alice, key)[0].enforce_zdr is False
    with django_assert_num_queries(0):
        assert rules_for(alice, key)[0].enforce_zdr is False  # cached: no query per request
    client.patch(f"/api/v1/guardrails/{guardrail}", {"enforce_zdr": True}, format="json")
    assert rules_for(alice, key)[0].enforce_zdr is True  # this process sees its own change at once

    # Another process's change: the row changes and the version row is bumped, no local signal.
    Guardrail.objects.filter(pk=guardrail).update(enforce_zdr=False)
    assert rules_for(alice, key)[0].enforce_zdr is True  # still the cached copy...
    Version.objects.update_or_create(name="guardrails", defaults={"value": "changed-elsewhere"})
    settings.CACHE_VERSION_CHECK_SECONDS = 0  # ...until this process next reads the counters
    assert rules_for(alice, key)[0].enforce_zdr is False
    assign_keys(client, guardrail, [key.hash], remove=True)
    assert rules_for(alice, key) == []


def test_deleting_a_member_drops_its_rule(alice, providers):
    client = alice.client(management=True)
    member = Member.objects.create(account_id=alice.account_id, user_id="user_a")
    key = new_key(alice, "mine", creator="user_a")
    assign_members(client, create(client), ["user_a"])
    assert [r.scope for r in rules_for(alice, key, "user_a")] == ["member"]
    member.delete()  # the assignment goes by cascade, and the cache with it
    assert rules_for(alice, key, "user_a") == []


# ---- current-period spend ---------------------------------------------------------------------------------


def spend(persona, key: ApiKey | None, cost: str, *, upstream: str = "0", byok: bool = False, ago=timedelta(0)):
    row = Generation.objects.create(
        id=f"gen-{Generation.objects.count()}",
        account_id=persona.account_id,
        api_key=key,
        workspace_id=persona.provisioned.workspace_id,
        requested_model="openai/gpt-4o",
        cost=Decimal(cost),
        upstream_cost=Decimal(upstream),
        is_byok=byok,
    )
    Generation.objects.filter(pk=row.pk).update(created_at=timezone.now() - ago)


def test_period_bounds_for_each_interval():
    now = datetime(2026, 2, 18, 15, 30, tzinfo=UTC)  # a Wednesday
    assert period_bounds(None, now) == (None, None)
    assert period_bounds("daily", now) == (datetime(2026, 2, 18, tzinfo=UTC), datetime(2026, 2, 19, tzinfo=UTC))
    assert period_bounds("weekly", now) == (datetime(2026, 2, 16, tzinfo=UTC), datetime(2026, 2, 23, tzinfo=UTC))
    assert period_bounds("monthly", now) == (datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC))
    december = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert period_bounds("monthly", december)[1] == datetime(2027, 1, 1, tzinfo=UTC)


def test_record_shows_the_spend_of_its_assignees_in_the_current_period(alice, providers):
    client = alice.client(management=True)
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    assigned, by_member, other = new_key(alice, "assigned"), new_key(alice, "by-member", "user_a"), new_key(alice, "o")
    guardrail = create(client, limit_usd=10, reset_interval="daily")
    assign_keys(client, guardrail, [assigned.hash])
    assign_members(client, guardrail, ["user_a"])
    spend(alice, assigned, "0.25")
    spend(alice, by_member, "0.5")
    spend(alice, other, "4")  # not governed by it
    spend(alice, assigned, "2", ago=timedelta(days=2))  # an earlier period
    spend(alice, assigned, "0.05", upstream="1", byok=True)  # BYOK: not counted by default
    record = client.get(f"/api/v1/guardrails/{guardrail}").json()["data"]
    assert record["usage"] == 0.75
    assert record["resets_at"] == period_bounds("daily")[1].isoformat().replace("+00:00", "Z")
    client.patch(f"/api/v1/guardrails/{guardrail}", {"include_byok_in_budgets": True}, format="json")
    assert client.get(f"/api/v1/guardrails/{guardrail}").json()["data"]["usage"] == 1.75  # + BYOK's list price
    lifetime = client.patch(f"/api/v1/guardrails/{guardrail}", {"reset_interval": None}, format="json").json()["data"]
    assert (lifetime["usage"], lifetime["resets_at"]) == (3.75, None)


def test_workspace_default_counts_only_requests_no_assignment_covers(alice, providers):
    client = alice.client(management=True)
    default = create(client, "default", is_workspace_default=True)
    assigned, free = new_key(alice, "assigned"), new_key(alice, "free")
    assign_keys(client, create(client, "own"), [assigned.hash])
    spend(alice, assigned, "1")
    spend(alice, free, "0.5")
    spend(alice, None, "0.25")  # a deleted key's request in this workspace
    usage = guardrail_usage(guardrail=Guardrail.objects.get(pk=default))
    assert usage.usage == Decimal("0.75") and usage.resets_at is None


# ---- concurrent writes -------------------------------------------------------------------------------------


def race(count: int, work) -> None:
    """Run work(index) in `count` threads released at once; any exception fails the test."""
    barrier, errors = threading.Barrier(count), []

    def attempt(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except Exception as exc:  # noqa: BLE001  (reported below with the others)
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=attempt, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs real concurrent transactions")
@pytest.mark.django_db(transaction=True)
def test_concurrent_defaults_and_moves_leave_one_of_each():
    carol = Persona(account_provision(name="carol", plan="payg", credits=Decimal(1)))
    workspace = carol.provisioned.workspace_id
    guardrails = [
        guardrail_create(account_id=carol.account_id, workspace_id=workspace, fields={"name": f"g{i}"})
        for i in range(8)
    ]
    key = carol.provisioned.inference_key.key

    def work(index: int) -> None:
        guardrail_update(guardrail=guardrails[index], changes={"is_workspace_default": True})
        guardrail_keys_assign(guardrail=guardrails[index], keys=[key])

    race(len(guardrails), work)
    assert Guardrail.objects.filter(workspace_id=workspace, is_workspace_default=True).count() == 1
    assert GuardrailKeyAssignment.objects.filter(api_key=key).count() == 1


def test_a_key_takes_a_guardrail_of_its_own_workspace_or_an_account_level_one(alice, providers):
    """Account-level guardrails are those of the account's default workspace; a guardrail of another workspace
    is assignable only to that workspace's keys (400 naming the key hashes; nothing is assigned)."""
    client = alice.client(management=True)
    other = Workspace.objects.create(account_id=alice.account_id, name="other")
    account_level = create(client, "account-level")
    other_ws = create(client, "other-ws", workspace_id=str(other.id))
    default_ws_key = new_key(alice, "default-ws")
    other_ws_key = api_key_create(account_id=alice.account_id, name="other-ws", workspace_id=other.id).key

    body = assert_error_envelope(assign_keys(client, other_ws, [other_ws_key.hash, default_ws_key.hash]), 400)
    assert default_ws_key.hash in body["error"]["message"] and other_ws_key.hash not in body["error"]["message"]
    assert list(body["error"]["metadata"]["fields"]) == ["key_hashes"]
    assert not GuardrailKeyAssignment.objects.exists()

    assert assign_keys(client, other_ws, [other_ws_key.hash]).json() == {"assigned_count": 1}
    assert assign_keys(client, account_level, [default_ws_key.hash, other_ws_key.hash]).json() == {
        "assigned_count": 2
    }  # the account-level one may be any key's (the other workspace's key moved to it)
    assert set(GuardrailKeyAssignment.objects.values_list("guardrail_id", flat=True)) == {
        Guardrail.objects.get(name="account-level").id
    }


def test_a_member_takes_only_an_account_level_guardrail(alice, providers):
    client = alice.client(management=True)
    other = Workspace.objects.create(account_id=alice.account_id, name="other")
    other_ws = create(client, "other-ws", workspace_id=str(other.id))
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    body = assert_error_envelope(assign_members(client, other_ws, ["user_a"]), 400)
    assert "account-level" in body["error"]["message"] and list(body["error"]["metadata"]["fields"]) == [
        "member_user_ids"
    ]
    assert not GuardrailMemberAssignment.objects.exists()
    assert assign_members(client, create(client, "account-level"), ["user_a"]).json() == {"assigned_count": 1}
