"""Issue 9 item 16: every admin form that writes what the API also writes validates through the same services
and serializers. A bad input gives the form back (200) with the message on the page and saves nothing; a good
one saves (302). No admin page answers 500 on the inputs of the issue."""

import html
import json
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from byok.crypto import mask_secret
from byok.models import ByokKey
from byok.services import byok_key_create
from byok.shapes import parse_credential
from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.billing.models import LedgerEntry
from routing.models import AccountRoutingSettings, Endpoint, Model, Provider


@pytest.fixture
def staff(db) -> Client:
    User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client(raise_request_exception=True)  # a server error fails the test with its traceback
    client.login(username="staff", password="pw")
    return client


def refused(response, *messages: str) -> str:
    """The form came back with these messages on the page."""
    assert response.status_code == 200, response.status_code
    page = html.unescape(response.content.decode())
    assert "Please correct the error" in page
    for message in messages:
        assert message in page, (message, page[page.find("errorlist") :][:2000])
    return page


# ---- API keys ---------------------------------------------------------------------------------------


def key_form(persona, **overrides) -> dict:
    return {
        "name": "staff-made",
        "kind": "inference",
        "account": persona.account_id,
        "workspace": persona.provisioned.workspace_id,
        "creator": "",
        "limit": "",
        "limit_reset": "",
        "expires_at_0": "",
        "expires_at_1": "",
        **overrides,
    }


def test_api_key_with_another_accounts_workspace_is_a_form_error(staff, alice, bob_other_account):
    before = ApiKey.objects.count()
    response = staff.post(
        "/admin/accounts/apikey/add/", key_form(alice, workspace=bob_other_account.provisioned.workspace_id)
    )
    refused(response, "workspace_id: no such workspace in this account")
    assert ApiKey.objects.count() == before


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"limit": "-1"}, "limit: must be a number from 0"),
        ({"limit": "1000000000.5"}, "limit: must be a number from 0 to 1000000000"),
        ({"limit": "1000000000000"}, "limit"),  # beyond the column's 12 integer digits: the form field refuses it
        ({"limit_reset": "hourly"}, "Select a valid choice"),
        ({"expires_at_0": "2001-01-01", "expires_at_1": "00:00:00"}, "expires_at: must be in the future"),
        ({"name": ""}, "This field is required"),
        ({"name": "a\x00b"}, "Null characters are not allowed"),
    ],
)
def test_api_key_add_refuses_what_post_keys_refuses(staff, alice, overrides, message):
    before = ApiKey.objects.count()
    refused(staff.post("/admin/accounts/apikey/add/", key_form(alice, **overrides)), message)
    assert ApiKey.objects.count() == before


def test_api_key_creator_must_be_a_member_of_the_keys_account(staff, alice, bob_other_account):
    bobs_member = Member.objects.create(account_id=bob_other_account.account_id, user_id="bob_only")
    response = staff.post("/admin/accounts/apikey/add/", key_form(alice, creator=bobs_member.pk))
    refused(response, "creator_user_id: not a member of this account")
    assert not ApiKey.objects.filter(name="staff-made").exists()


def test_api_key_add_and_change_with_good_input(staff, alice):
    member = Member.objects.create(account_id=alice.account_id, user_id="user_9")
    response = staff.post(
        "/admin/accounts/apikey/add/", key_form(alice, creator=member.pk, limit="12.5", limit_reset="daily")
    )
    assert response.status_code == 302
    key = ApiKey.objects.get(name="staff-made")
    assert key.workspace_id == alice.provisioned.workspace_id and key.creator == member and key.limit == Decimal("12.5")
    url = f"/admin/accounts/apikey/{key.pk}/change/"
    page = staff.get(url).content.decode()
    assert 'name="account"' not in page and 'name="workspace"' not in page  # never moves across tenants
    change = {"name": "renamed", "limit": "-3", "limit_reset": "", "expires_at_0": "", "expires_at_1": ""}
    refused(staff.post(url, change), "limit: must be a number from 0")
    key.refresh_from_db()
    assert key.name == "staff-made" and key.limit == Decimal("12.5")
    assert staff.post(url, {**change, "limit": "3"}).status_code == 302
    key.refresh_from_db()
    assert key.name == "renamed" and key.limit == Decimal("3")


def test_workspace_and_member_never_move_and_no_second_default(staff, alice, bob_other_account):
    response = staff.post(
        "/admin/accounts/workspace/add/", {"name": "Second", "account": alice.account_id, "is_default": "on"}
    )
    assert response.status_code == 302  # is_default is not the admin's to set: a plain workspace is added
    assert Workspace.objects.filter(account_id=alice.account_id, is_default=True).count() == 1
    workspace = Workspace.objects.get(name="Second")
    staff.post(
        f"/admin/accounts/workspace/{workspace.pk}/change/", {"name": "Moved", "account": bob_other_account.account_id}
    )
    workspace.refresh_from_db()
    assert workspace.account_id == alice.account_id and workspace.name == "Moved"
    member = Member.objects.create(account_id=alice.account_id, user_id="u1")
    staff.post(
        f"/admin/accounts/member/{member.pk}/change/",
        {"user_id": "u1", "email": "", "account": bob_other_account.account_id},
    )
    member.refresh_from_db()
    assert member.account_id == alice.account_id
    duplicate = staff.post("/admin/accounts/member/add/", {"user_id": "u1", "email": "", "account": alice.account_id})
    refused(duplicate, "already exists")


def test_account_add_with_inline_workspaces(staff):
    response = staff.post(
        "/admin/accounts/account/add/",
        {
            "name": "carol",
            "plan": "payg",
            "workspaces-TOTAL_FORMS": "1",
            "workspaces-INITIAL_FORMS": "0",
            "workspaces-0-name": "Team",
        },
    )
    assert response.status_code == 302
    account = Account.objects.get(name="carol")
    assert sorted(account.workspaces.values_list("name", "is_default")) == [("Default", True), ("Team", False)]


# ---- BYOK keys ---------------------------------------------------------------------------------------


@pytest.fixture
def byok_key(alice, providers):
    return byok_key_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        provider="openai",
        kind="api_key",
        credential=parse_credential(kind="api_key", value="sk-proj-abcdefghijklmnop"),
    )


def byok_form(key, **overrides) -> dict:
    return {
        "name": key.name,
        "sort_order": str(key.sort_order),
        "shared_capacity": key.shared_capacity,
        "allowed_models": "null",
        "allowed_api_key_hashes": "null",
        "allowed_user_ids": "null",
        **overrides,
    }


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"allowed_models": '["no/such-model"]'}, "unknown model ids"),
        ({"allowed_models": '["not a model id"]'}, "allowed_models"),
        ({"allowed_models": "[]"}, "allowed_models"),
        ({"allowed_models": '"openai/gpt-4o"'}, "allowed_models"),
        ({"allowed_api_key_hashes": '["XYZ"]'}, "allowed_api_key_hashes"),
        ({"allowed_api_key_hashes": json.dumps(["a" * 64])}, "do not belong to a live API key of this account"),
        ({"allowed_user_ids": '["stranger"]'}, "not members of this account"),
        ({"allowed_user_ids": "[1, 2]"}, "allowed_user_ids"),
        ({"sort_order": "-1"}, "sort_order"),
        ({"shared_capacity": "sometimes"}, "Select a valid choice"),
        ({"allowed_models": "{not json"}, "Enter a valid JSON"),
    ],
)
def test_byok_admin_refuses_filters_the_api_refuses(staff, byok_key, overrides, message):
    response = staff.post(f"/admin/byok/byokkey/{byok_key.pk}/change/", byok_form(byok_key, **overrides))
    refused(response, message)
    byok_key.refresh_from_db()
    assert byok_key.allowed_models is None and byok_key.allowed_api_key_hashes is None
    assert byok_key.allowed_user_ids is None and byok_key.sort_order == 0


def test_byok_admin_refuses_another_accounts_key_hash(staff, byok_key, bob_other_account):
    bobs = bob_other_account.provisioned.inference_key.key.hash
    refused(
        staff.post(
            f"/admin/byok/byokkey/{byok_key.pk}/change/", byok_form(byok_key, allowed_api_key_hashes=json.dumps([bobs]))
        ),
        "do not belong",
    )
    byok_key.refresh_from_db()
    assert byok_key.allowed_api_key_hashes is None


def test_byok_admin_saves_good_filters_and_reorders_like_patch(staff, alice, byok_key):
    second = byok_key_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        provider="openai",
        kind="api_key",
        credential=parse_credential(kind="api_key", value="sk-proj-second-key-000000"),
    )
    Member.objects.create(account_id=alice.account_id, user_id="user_1")
    own = alice.provisioned.inference_key.key.hash
    response = staff.post(
        f"/admin/byok/byokkey/{second.pk}/change/",
        byok_form(
            second,
            sort_order="0",
            allowed_models='["openai/gpt-4o", "openai/gpt-4o"]',
            allowed_api_key_hashes=json.dumps([own]),
            allowed_user_ids='["user_1"]',
            disabled="on",
        ),
    )
    assert response.status_code == 302
    second.refresh_from_db()
    byok_key.refresh_from_db()
    assert second.allowed_models == ["openai/gpt-4o"] and second.allowed_api_key_hashes == [own]
    assert second.allowed_user_ids == ["user_1"] and second.disabled
    assert (second.sort_order, byok_key.sort_order) == (0, 1)  # the other key shifted, as with PATCH /byok
    assert (
        staff.post(
            f"/admin/byok/byokkey/{second.pk}/change/", byok_form(second, sort_order="0", is_fallback="on")
        ).status_code
        == 302
    )
    second.refresh_from_db()
    byok_key.refresh_from_db()
    assert second.is_fallback and second.sort_order == 0 and byok_key.sort_order == 0
    assert "sk-proj-second" not in staff.get(f"/admin/byok/byokkey/{second.pk}/change/").content.decode()
    assert staff.get("/admin/byok/byokkey/add/").status_code == 200  # added as POST /byok adds them (issue 17)


# ---- routing settings ---------------------------------------------------------------------------------


def routing_form(persona, **overrides) -> dict:
    return {
        "account": persona.account_id,
        "allowed_providers": "[]",
        "ignored_providers": "[]",
        "data_collection": "allow",
        **overrides,
    }


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"allowed_providers": '["nope"]'}, "unknown provider slugs"),
        ({"ignored_providers": '["openai", "nope"]'}, "unknown provider slugs"),
        ({"allowed_providers": '"openai"'}, "allowed_providers"),
        ({"allowed_providers": "[1]"}, "allowed_providers"),
        ({"allowed_providers": json.dumps(["openai"] * 101)}, "allowed_providers"),
        ({"data_collection": "maybe"}, "Select a valid choice"),
    ],
)
def test_routing_settings_admin_refuses_what_patch_refuses(staff, alice, providers, overrides, message):
    refused(staff.post("/admin/routing/accountroutingsettings/add/", routing_form(alice, **overrides)), message)
    assert not AccountRoutingSettings.objects.exists()


def test_routing_settings_admin_saves_good_input(staff, alice, providers):
    response = staff.post(
        "/admin/routing/accountroutingsettings/add/",
        routing_form(alice, allowed_providers='["openai", "azure"]', ignored_providers="", enforce_zdr="on"),
    )
    assert response.status_code == 302
    row = AccountRoutingSettings.objects.get(account_id=alice.account_id)
    assert row.allowed_providers == ["openai", "azure"] and row.ignored_providers == [] and row.enforce_zdr
    refused(staff.post("/admin/routing/accountroutingsettings/add/", routing_form(alice)), "already exists")
    url = f"/admin/routing/accountroutingsettings/{row.pk}/change/"
    refused(staff.post(url, routing_form(alice, ignored_providers='["nope"]')), "unknown provider slugs")
    assert staff.post(url, routing_form(alice, ignored_providers='["azure"]')).status_code == 302
    row.refresh_from_db()
    assert row.ignored_providers == ["azure"] and row.allowed_providers == [] and not row.enforce_zdr


# ---- credits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "amount,message",
    [
        ("0", "greater than or equal to"),
        ("-5", "greater than or equal to"),
        ("1000000001", "less than or equal to"),
        ("NaN", "Enter a number"),
        ("Infinity", "Enter a number"),
        ("1e400", "less than or equal to"),
        ("0.0000000000001", "decimal places"),
        ("abc", "Enter a number"),
    ],
)
def test_topup_admin_refuses_bad_amounts(staff, alice, amount, message):
    entries = LedgerEntry.objects.count()
    refused(
        staff.post(
            "/admin/billing/ledgerentry/add/",
            {"account": alice.account_id, "kind": "topup", "amount": amount, "note": ""},
        ),
        message,
    )
    assert LedgerEntry.objects.count() == entries
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("10")


def test_topup_admin_refuses_a_balance_the_column_cannot_hold(staff, alice):
    Account.objects.filter(pk=alice.account_id).update(balance=Decimal("999999999999"))
    refused(
        staff.post(
            "/admin/billing/ledgerentry/add/",
            {"account": alice.account_id, "kind": "refund", "amount": "1", "note": ""},
        ),
        "the balance would exceed",
    )


def test_topup_and_refund_admin_with_good_input(staff, alice):
    for kind, amount in (("topup", "5"), ("refund", "0.25")):
        response = staff.post(
            "/admin/billing/ledgerentry/add/",
            {"account": alice.account_id, "kind": kind, "amount": amount, "note": "staff"},
        )
        assert response.status_code == 302
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("15.25")
    assert LedgerEntry.objects.filter(account_id=alice.account_id, note="staff").count() == 2


# ---- providers, models, endpoints ---------------------------------------------------------------------


def provider_form(**overrides) -> dict:
    return {
        "slug": "my-vllm",
        "name": "My vLLM",
        "adapter": "openai_chat",
        "credential_kind": "api_key",
        "base_url": "https://vllm.example/v1",
        "status": "active",
        "new_credential": "sk-vllm-secret-value",
        "endpoints-TOTAL_FORMS": "0",
        "endpoints-INITIAL_FORMS": "0",
        **overrides,
    }


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"new_credential": "sk-vllm\x01secret"}, "key contains a control character"),
        ({"new_credential": "sk-vllm\x00secret"}, "Null characters are not allowed"),
        ({"new_credential": "sk-vllm secret"}, "key must not contain whitespace"),
        ({"new_credential": "sk-vllm-sécret"}, "key must be printable ASCII"),
        ({"new_credential": "k" * 9000}, "key is longer than 8192 characters"),
        ({"credential_kind": "vertex", "new_credential": '{"type": "service_account"}'}, "key.project_id is required"),
        ({"base_url": "ftp://vllm.example/v1"}, "base_url must be an http or https URL"),
        ({"base_url": "https://vllm.example:99999/v1"}, "base_url is not a valid URL"),
        ({"slug": "My VLLM"}, "slug must be lowercase"),
        ({"api_key_env": "VLLM KEY"}, "api_key_env must be an environment variable name"),
    ],
)
def test_provider_admin_refuses_unusable_rows_and_credentials(staff, db, overrides, message):
    page = refused(staff.post("/admin/routing/provider/add/", provider_form(**overrides)), message)
    assert not Provider.objects.filter(slug__in=["my-vllm", "My VLLM"]).exists()
    assert "secret" not in page.split("errorlist", 1)[-1].split("</ul>", 1)[0]  # the key is never echoed


def test_provider_admin_credential_change_is_checked_and_good_one_saved(staff, providers):
    openai = Provider.objects.get(slug="openai")
    url = f"/admin/routing/provider/{openai.pk}/change/"
    form = provider_form(
        slug="openai",
        name="OpenAI",
        adapter="openai_responses",
        base_url="https://api.openai.com/v1",
        new_credential="sk-op\x1b[31m-key",
    )
    refused(staff.post(url, form), "key contains a control character")
    openai.refresh_from_db()
    assert openai.credential_sealed is None
    assert staff.post(url, {**form, "new_credential": "sk-operator-good-key"}).status_code == 302
    openai.refresh_from_db()
    assert openai.credential_label == mask_secret("sk-operator-good-key")


def endpoint_form(**overrides) -> dict:
    return {
        "model": "openai/gpt-4o",
        "provider": Provider.objects.get(slug="azure").pk,
        "upstream_model": "gpt-4o",
        "price_prompt": "1",
        "price_completion": "2",
        "price_request": "0",
        "context_length": "8192",
        "quantization": "unknown",
        "supported_parameters": "[]",
        "service_tiers": "[]",
        "enabled": "on",
        **overrides,
    }


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"price_prompt": "-1"}, "price_prompt must be a price between 0"),
        ({"price_cached_input": "-0.5"}, "price_cached_input must be a price between 0"),
        ({"price_request": "-1"}, "price_request must be a price between 0"),
        ({"context_length": "0"}, "context_length must be a positive integer"),
        ({"max_completion_tokens": "-4"}, "max_completion_tokens must be a positive integer"),
        ({"upstream_model": "gpt 4o"}, "upstream_model must be printable ASCII"),
        ({"supported_parameters": '{"a": 1}'}, "supported_parameters must be a list of strings"),
        ({"service_tiers": "[1]"}, "service_tiers must be a list of strings"),
        ({"price_prompt": "NaN"}, "Enter a number"),
    ],
)
def test_endpoint_admin_refuses_unusable_rows(staff, providers, overrides, message):
    refused(staff.post("/admin/routing/endpoint/add/", endpoint_form(**overrides)), message)
    assert not Endpoint.objects.filter(provider__slug="azure").exists()


def test_model_admin_refuses_bad_ids_and_inline_endpoints(staff, providers):
    form = {
        "id": "acme/tiny",
        "name": "Tiny",
        "kind": "chat",
        "context_length": "8192",
        "created": "0",
        "input_modalities": '["text"]',
        "output_modalities": '["text"]',
        "supported_parameters": "[]",
        "endpoints-TOTAL_FORMS": "1",
        "endpoints-INITIAL_FORMS": "0",
        "endpoints-0-provider": Provider.objects.get(slug="openai").pk,
        "endpoints-0-upstream_model": "tiny",
        "endpoints-0-price_prompt": "0.1",
        "endpoints-0-price_completion": "0.2",
        "endpoints-0-price_request": "0",
        "endpoints-0-context_length": "8192",
        "endpoints-0-quantization": "bf16",
        "endpoints-0-enabled": "on",
    }
    refused(staff.post("/admin/routing/model/add/", {**form, "id": "noslash"}), "must look like <author>/<slug>")
    refused(
        staff.post("/admin/routing/model/add/", {**form, "input_modalities": '"text"'}),
        "input_modalities must be a list of strings",
    )
    refused(
        staff.post("/admin/routing/model/add/", {**form, "endpoints-0-price_completion": "-0.2"}),
        "price_completion must be a price between 0",
    )
    assert not Model.objects.filter(id__in=["acme/tiny", "noslash"]).exists()
    assert staff.post("/admin/routing/model/add/", form).status_code == 302
    assert Endpoint.objects.get(model_id="acme/tiny").price_completion == Decimal("0.2")


def test_admin_pages_render(staff, alice, byok_key):
    """Every list, add and change page of the models above renders (no 500) with data in place."""
    AccountRoutingSettings.objects.create(account_id=alice.account_id)
    pages = ["/admin/"]
    for path, model in [
        ("accounts/account", Account),
        ("accounts/workspace", Workspace),
        ("accounts/member", Member),
        ("accounts/apikey", ApiKey),
        ("byok/byokkey", ByokKey),
        ("billing/ledgerentry", LedgerEntry),
        ("routing/provider", Provider),
        ("routing/model", Model),
        ("routing/endpoint", Endpoint),
        ("routing/accountroutingsettings", AccountRoutingSettings),
    ]:
        pages.append(f"/admin/{path}/")
        first = model.objects.first()
        if first is not None:
            pages.append(f"/admin/{path}/{first.pk}/change/")
        if path != "byok/byokkey":
            pages.append(f"/admin/{path}/add/")
    for page in pages:
        assert staff.get(page).status_code == 200, page
