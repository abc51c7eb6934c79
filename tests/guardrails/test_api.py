"""The /guardrails management API: the record, every field's rules with exact statuses, PATCH replacing
collections, the workspace default, the management key, and isolation between accounts (404)."""

from decimal import Decimal

import pytest

from gateway.accounts.models import Workspace
from guardrails.models import Guardrail
from guardrails.patterns import MAX_PATTERN_CHARS
from tests.support import assert_error_envelope

RECORD_FIELDS = {
    "id",
    "workspace_id",
    "is_workspace_default",
    "name",
    "description",
    "limit_usd",
    "reset_interval",
    "include_byok_in_budgets",
    "allowed_models",
    "ignored_models",
    "allowed_providers",
    "ignored_providers",
    "enforce_zdr",
    "data_collection",
    "content_filters",
    "content_filter_builtins",
    "usage",
    "resets_at",
    "created_at",
    "updated_at",
}


def create(client, **body):
    return client.post("/api/v1/guardrails", {"name": "team", **body}, format="json")


def test_create_get_list_patch_delete(alice, providers):
    client = alice.client(management=True)
    created = create(client, description="for the team")
    assert created.status_code == 201
    record = created.json()["data"]
    assert set(record) == RECORD_FIELDS
    assert record["workspace_id"] == str(alice.provisioned.workspace_id)
    assert record["limit_usd"] is None and record["reset_interval"] is None and record["resets_at"] is None
    assert record["allowed_models"] is None and record["content_filters"] == [] and record["usage"] == 0
    assert (record["enforce_zdr"], record["data_collection"], record["is_workspace_default"]) == (False, "allow", False)
    url = f"/api/v1/guardrails/{record['id']}"
    assert client.get(url).json() == {"data": record}
    listed = client.get("/api/v1/guardrails").json()
    assert listed == {"data": [record], "total_count": 1}
    patched = client.patch(url, {"name": "renamed"}, format="json")
    assert patched.status_code == 200 and patched.json()["data"]["name"] == "renamed"
    deleted = client.delete(url)
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}
    assert_error_envelope(client.get(url), 404)
    assert_error_envelope(client.delete(url), 404)


def test_every_field_set_and_read_back(alice, providers, settings):
    settings.GUARDRAILS_ENTITY_MODEL = "openai/gpt-4o"  # person-name and address need the entity model
    body = {
        "description": "all of it",
        "is_workspace_default": True,
        "limit_usd": 12.345678,
        "reset_interval": "weekly",
        "include_byok_in_budgets": True,
        "allowed_models": ["openai/gpt-4o", "anthropic/*"],
        "ignored_models": ["openai/gpt-4o-*"],
        "allowed_providers": ["openai", "google-vertex"],
        "ignored_providers": ["azure"],
        "enforce_zdr": True,
        "data_collection": "deny",
        "content_filters": [
            {"pattern": r"ACME-\d{4}", "action": "block", "label": "project code"},
            {"pattern": "secret", "action": "redact"},
        ],
        "content_filter_builtins": [
            {"slug": slug, "action": "flag"}
            for slug in ("email", "phone", "ssn", "credit-card", "ip-address", "person-name", "address")
        ]
        + [{"slug": "regex-prompt-injection", "action": "block"}],
    }
    created = create(alice.client(management=True), **body)
    assert created.status_code == 201, created.content
    record = created.json()["data"]
    expected = {**body, "content_filters": [body["content_filters"][0], {**body["content_filters"][1], "label": None}]}
    assert {name: record[name] for name in body} == expected
    assert record["resets_at"] is not None
    assert Guardrail.objects.get(pk=record["id"]).limit_usd == Decimal("12.345678")


@pytest.mark.parametrize("amount", [0, 0.000001, 1234.567891, 999999999.123456, 1000000000])
def test_limit_usd_keeps_six_decimal_places(alice, providers, amount):
    created = create(alice.client(management=True), limit_usd=amount)
    assert created.status_code == 201
    assert created.json()["data"]["limit_usd"] == amount
    assert Guardrail.objects.get(pk=created.json()["data"]["id"]).limit_usd == Decimal(repr(amount))


BAD_FIELDS = [
    ("name", None),
    ("name", ""),
    ("name", 7),
    ("name", "n" * 201),
    ("description", 5),
    ("description", "d" * 1001),
    ("is_workspace_default", "true"),
    ("limit_usd", -0.01),
    ("limit_usd", "5"),
    ("limit_usd", True),
    ("limit_usd", 1000000000.01),
    ("reset_interval", "hourly"),
    ("reset_interval", 1),
    ("include_byok_in_budgets", 1),
    ("allowed_models", []),
    ("allowed_models", "openai/gpt-4o"),
    ("allowed_models", ["openai/unknown"]),
    ("allowed_models", ["no-slash"]),
    ("allowed_models", ["*/gpt-4o"]),
    ("allowed_models", [7]),
    ("allowed_models", [f"openai/m{i}-*" for i in range(101)]),
    ("ignored_models", ["openai/unknown"]),
    ("ignored_models", []),
    ("allowed_providers", ["nope"]),
    ("allowed_providers", []),
    ("allowed_providers", [""]),
    ("ignored_providers", ["nope"]),
    ("ignored_providers", {"openai": True}),
    ("enforce_zdr", "yes"),
    ("data_collection", "maybe"),
    ("data_collection", None),
    ("content_filters", None),
    ("content_filters", {"pattern": "a", "action": "block"}),
    ("content_filters", ["a"]),
    ("content_filters", [{"pattern": "a"}]),
    ("content_filters", [{"pattern": "a", "action": "drop"}]),
    ("content_filters", [{"pattern": 5, "action": "flag"}]),
    ("content_filters", [{"pattern": "a", "action": "flag", "label": "[REDACTED]"}]),
    ("content_filters", [{"pattern": "a", "action": "flag", "label": "l" * 65}]),
    ("content_filters", [{"pattern": "a", "action": "flag", "label": ""}]),
    ("content_filters", [{"pattern": f"w{i}", "action": "flag"} for i in range(101)]),
    ("content_filter_builtins", [{"slug": "passport", "action": "block"}]),
    ("content_filter_builtins", [{"slug": "email", "action": "hide"}]),
    ("content_filter_builtins", [{"slug": "email"}]),
    ("content_filter_builtins", [{"slug": "email", "action": "flag"}, {"slug": "email", "action": "block"}]),
    ("workspace_id", "not-a-uuid"),
    ("workspace_id", 5),
]


@pytest.mark.parametrize("field,value", BAD_FIELDS)
def test_each_field_refused_with_400_naming_it(alice, providers, field, value):
    client = alice.client(management=True)
    body = assert_error_envelope(create(client, **{field: value}), 400)
    assert field in body["error"]["message"], body
    assert any(name.startswith(field) for name in body["error"]["metadata"]["fields"]), body
    record = create(client).json()["data"]
    if field not in ("name", "workspace_id"):  # the same rules on PATCH
        patched = assert_error_envelope(
            client.patch(f"/api/v1/guardrails/{record['id']}", {field: value}, format="json"), 400
        )
        assert field in patched["error"]["message"]
    assert Guardrail.objects.count() == 1


@pytest.mark.parametrize(
    "pattern,why",
    [
        (r"(a)\1", "backreference"),
        (r"foo(?=bar)", "lookahead"),
        (r"(?<!x)y", "lookbehind"),
        ("(unclosed", "syntax"),
        ("a*", "matches the empty text"),
        ("a" * (MAX_PATTERN_CHARS + 1), "too long"),
    ],
)
def test_invalid_regex_pattern_names_the_filter(alice, providers, pattern, why):
    filters = [{"pattern": "fine", "action": "flag"}, {"pattern": pattern, "action": "block", "label": "bad"}]
    body = assert_error_envelope(create(alice.client(management=True), content_filters=filters), 400)
    assert body["error"]["metadata"]["code"] == "invalid_regex_pattern", why
    assert list(body["error"]["metadata"]["fields"]) == ["content_filters[1].pattern"], why
    assert body["error"]["message"].startswith("content_filters[1].pattern: invalid_regex_pattern: ")
    assert not Guardrail.objects.exists()


def test_redos_shaped_pattern_is_accepted_because_re2_runs_it_in_linear_time(alice, providers):
    created = create(alice.client(management=True), content_filters=[{"pattern": "(a+)+$", "action": "block"}])
    assert created.status_code == 201


@pytest.mark.parametrize("slug", ["person-name", "address"])
def test_entity_builtins_refused_without_an_entity_model(alice, providers, settings, slug):
    settings.GUARDRAILS_ENTITY_MODEL = ""
    builtins = [{"slug": "email", "action": "redact"}, {"slug": slug, "action": "redact"}]
    body = assert_error_envelope(create(alice.client(management=True), content_filter_builtins=builtins), 400)
    assert list(body["error"]["metadata"]["fields"]) == ["content_filter_builtins[1].slug"]
    assert "GUARDRAILS_ENTITY_MODEL" in body["error"]["message"]


def test_workspace_of_another_account_is_400_own_other_workspace_is_used(alice, bob_other_account, providers):
    client = alice.client(management=True)
    bobs = str(bob_other_account.provisioned.workspace_id)
    body = assert_error_envelope(create(client, workspace_id=bobs), 400)
    assert "workspace_id" in body["error"]["metadata"]["fields"]
    second = Workspace.objects.create(account_id=alice.account_id, name="second")
    created = create(client, workspace_id=str(second.id))
    assert created.status_code == 201 and created.json()["data"]["workspace_id"] == str(second.id)
    listed = client.get("/api/v1/guardrails", {"workspace_id": str(second.id)}).json()
    assert listed["total_count"] == 1
    assert client.get("/api/v1/guardrails", {"workspace_id": bobs}).json()["total_count"] == 0


def test_patch_keeps_omitted_fields_and_replaces_collections(alice, providers):
    client = alice.client(management=True)
    record = create(
        client,
        limit_usd=5,
        reset_interval="daily",
        allowed_models=["openai/gpt-4o"],
        content_filters=[{"pattern": "one", "action": "flag"}, {"pattern": "two", "action": "block"}],
        content_filter_builtins=[{"slug": "email", "action": "redact"}],
    ).json()["data"]
    url = f"/api/v1/guardrails/{record['id']}"
    kept = client.patch(url, {"description": "d"}, format="json").json()["data"]
    assert {k: kept[k] for k in ("limit_usd", "reset_interval", "allowed_models")} == {
        "limit_usd": 5,
        "reset_interval": "daily",
        "allowed_models": ["openai/gpt-4o"],
    }
    replaced = client.patch(
        url, {"content_filters": [{"pattern": "three", "action": "redact", "label": "t"}]}, format="json"
    ).json()["data"]
    assert replaced["content_filters"] == [{"pattern": "three", "action": "redact", "label": "t"}]
    assert replaced["content_filter_builtins"] == [{"slug": "email", "action": "redact"}]
    cleared = client.patch(
        url,
        {"allowed_models": None, "limit_usd": None, "reset_interval": None, "content_filter_builtins": []},
        format="json",
    ).json()["data"]
    assert cleared["allowed_models"] is None and cleared["limit_usd"] is None and cleared["resets_at"] is None
    assert cleared["content_filter_builtins"] == [] and cleared["content_filters"] == replaced["content_filters"]


def test_one_workspace_default_setting_another_moves_it(alice, providers):
    client = alice.client(management=True)
    first = create(client, name="first", is_workspace_default=True).json()["data"]
    second = create(client, name="second").json()["data"]
    moved = client.patch(f"/api/v1/guardrails/{second['id']}", {"is_workspace_default": True}, format="json")
    assert moved.status_code == 200 and moved.json()["data"]["is_workspace_default"] is True
    assert client.get(f"/api/v1/guardrails/{first['id']}").json()["data"]["is_workspace_default"] is False
    third = create(client, name="third", is_workspace_default=True).json()["data"]
    assert list(Guardrail.objects.filter(is_workspace_default=True).values_list("name", flat=True)) == ["third"]
    off = client.patch(f"/api/v1/guardrails/{third['id']}", {"is_workspace_default": False}, format="json")
    assert off.json()["data"]["is_workspace_default"] is False
    assert not Guardrail.objects.filter(is_workspace_default=True).exists()


def test_management_key_required(alice, providers):
    record = create(alice.client(management=True)).json()["data"]
    inference = alice.client()
    for response in (
        create(inference),
        inference.get("/api/v1/guardrails"),
        inference.get(f"/api/v1/guardrails/{record['id']}"),
        inference.patch(f"/api/v1/guardrails/{record['id']}", {"name": "x"}, format="json"),
        inference.delete(f"/api/v1/guardrails/{record['id']}"),
        inference.get("/api/v1/guardrails/assignments/keys"),
        inference.post(f"/api/v1/guardrails/{record['id']}/assignments/members", {}, format="json"),
    ):
        body = assert_error_envelope(response, 403)
        assert body["error"]["message"] == "Only management keys can perform this operation"
    anonymous = alice.client()
    anonymous.credentials()
    assert_error_envelope(anonymous.get("/api/v1/guardrails"), 401)
    assert Guardrail.objects.get(pk=record["id"]).name == "team"


def test_another_accounts_guardrail_is_404_everywhere(alice, bob_other_account, providers):
    bobs = create(bob_other_account.client(management=True), name="bob's").json()["data"]
    client = alice.client(management=True)
    base = f"/api/v1/guardrails/{bobs['id']}"
    own_hash = alice.provisioned.inference_key.key.hash
    for response in (
        client.get(base),
        client.patch(base, {"name": "taken"}, format="json"),
        client.delete(base),
        client.get(f"{base}/assignments/keys"),
        client.post(f"{base}/assignments/keys", {"key_hashes": [own_hash]}, format="json"),
        client.post(f"{base}/assignments/keys/remove", {"key_hashes": [own_hash]}, format="json"),
        client.get(f"{base}/assignments/members"),
        client.post(f"{base}/assignments/members", {"member_user_ids": ["u"]}, format="json"),
        client.post(f"{base}/assignments/members/remove", {"member_user_ids": ["u"]}, format="json"),
    ):
        body = assert_error_envelope(response, 404)
        assert body["error"]["message"] == "Guardrail not found"
    assert client.get("/api/v1/guardrails").json() == {"data": [], "total_count": 0}
    assert Guardrail.objects.get(pk=bobs["id"]).name == "bob's"
    assert_error_envelope(client.get("/api/v1/guardrails/not-a-uuid"), 404)


def test_list_pagination(alice, providers):
    client = alice.client(management=True)
    ids = [create(client, name=f"g{i}").json()["data"]["id"] for i in range(5)]
    page = client.get("/api/v1/guardrails", {"offset": 1, "limit": 2}).json()
    assert page["total_count"] == 5 and [r["id"] for r in page["data"]] == ids[1:3]
    for bad in ({"limit": 0}, {"limit": 101}, {"offset": -1}, {"limit": "1e2"}, {"limit": ""}, {"workspace_id": "x"}):
        body = assert_error_envelope(client.get("/api/v1/guardrails", bad), 400)
        assert set(body["error"]["metadata"]["fields"]) == set(bad)
