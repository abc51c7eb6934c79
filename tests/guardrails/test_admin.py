"""The guardrail admin: the form refuses what the API refuses (a form error, nothing saved), saves through
the services (the workspace default moves), inline assignments move keys and members and refuse other
accounts', the list shows scope, budget, spend and reset, and "test this text" shows what the filters do."""

import html
import json
from decimal import Decimal

import pytest
from django.test import Client
from django.utils.html import strip_tags

from gateway.accounts.models import Member, Workspace
from gateway.accounts.services import api_key_create
from gateway.billing.models import Generation
from guardrails.models import Guardrail, GuardrailKeyAssignment, GuardrailMemberAssignment
from guardrails.services import guardrail_create, guardrail_keys_assign

ADD = "/admin/guardrails/guardrail/add/"


def inline(prefix: str, rows: list[dict], initial: int = 0) -> dict:
    data = {
        f"{prefix}-TOTAL_FORMS": str(len(rows)),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }
    for index, row in enumerate(rows):
        data.update({f"{prefix}-{index}-{name}": value for name, value in row.items()})
    return data


def form(persona, *, keys=(), members=(), key_initial=0, member_initial=0, **overrides) -> dict:
    return {
        "account": persona.account_id,
        "workspace": persona.provisioned.workspace_id,
        "name": "staff-made",
        "description": "",
        "limit_usd": "",
        "reset_interval": "",
        "allowed_models": "null",
        "ignored_models": "null",
        "allowed_providers": "null",
        "ignored_providers": "null",
        "data_collection": "allow",
        "content_filters": "[]",
        "content_filter_builtins": "[]",
        **inline("key_assignments", list(keys), key_initial),
        **inline("member_assignments", list(members), member_initial),
        **overrides,
    }


def refused(response, *messages: str) -> None:
    assert response.status_code == 200, response.status_code
    page = html.unescape(response.content.decode())
    assert "Please correct the error" in page
    for message in messages:
        assert message in page, (message, page[page.find("errorlist") :][:1500])


def test_add_saves_through_the_service_and_moves_the_workspace_default(staff, alice, providers):
    old = guardrail_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        fields={"name": "old", "is_workspace_default": True},
    )
    filters = [{"pattern": r"ACME-\d+", "action": "redact", "label": "code"}]
    response = staff.post(
        ADD,
        form(
            alice,
            is_workspace_default="on",
            limit_usd="2.000001",
            reset_interval="monthly",
            allowed_models='["openai/*"]',
            content_filters=json.dumps(filters),
            content_filter_builtins='[{"slug": "email", "action": "block"}]',
        ),
    )
    assert response.status_code == 302
    made = Guardrail.objects.get(name="staff-made")
    assert made.is_workspace_default and made.limit_usd == Decimal("2.000001") and made.reset_interval == "monthly"
    assert made.content_filters == [{"pattern": r"ACME-\d+", "action": "redact", "label": "code"}]
    assert made.allowed_models == ["openai/*"]
    old.refresh_from_db()
    assert not old.is_workspace_default


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"content_filters": '[{"pattern": "(a)\\\\1", "action": "block"}]'}, "invalid_regex_pattern"),
        ({"content_filters": '[{"pattern": "x", "action": "drop"}]'}, "content_filters"),
        ({"content_filters": "null"}, "content_filters"),
        ({"content_filter_builtins": '[{"slug": "person-name", "action": "redact"}]'}, "GUARDRAILS_ENTITY_MODEL"),
        ({"content_filter_builtins": '[{"slug": "passport", "action": "redact"}]'}, "content_filter_builtins"),
        ({"allowed_models": '["openai/unknown"]'}, "unknown model ids"),
        ({"allowed_models": "[]"}, "use null"),
        ({"ignored_providers": '["nope"]'}, "unknown provider slugs"),
        ({"limit_usd": "-1"}, "Must be between 0"),
        ({"reset_interval": "hourly"}, "Select a valid choice"),
        ({"content_filters": "{not json"}, "Enter a valid JSON"),
    ],
)
def test_add_refuses_what_the_api_refuses(staff, alice, providers, settings, overrides, message):
    settings.GUARDRAILS_ENTITY_MODEL = ""
    refused(staff.post(ADD, form(alice, **overrides)), message)
    assert not Guardrail.objects.exists()


def test_a_bad_pattern_is_an_error_on_the_filters_field(staff, alice, providers):
    response = staff.post(
        ADD, form(alice, content_filters='[{"pattern": "ok", "action": "flag"}, {"pattern": "(", "action": "flag"}]')
    )
    refused(response, "content_filters[1].pattern: invalid_regex_pattern: not a valid RE2 regular expression")
    assert "content_filters[1].pattern" in str(response.context["adminform"].form.errors["content_filters"])


def test_add_refuses_another_accounts_workspace(staff, alice, bob_other_account, providers):
    refused(staff.post(ADD, form(alice, workspace=bob_other_account.provisioned.workspace_id)), "another account")
    assert not Guardrail.objects.exists()


def test_change_validates_and_saves_only_what_changed(staff, alice, providers):
    guardrail = guardrail_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        fields={"name": "g", "content_filters": [{"pattern": "one", "action": "flag", "label": None}]},
    )
    url = f"/admin/guardrails/guardrail/{guardrail.pk}/change/"
    base = form(alice, name="g", content_filters=json.dumps(guardrail.content_filters))
    refused(staff.post(url, {**base, "content_filters": '[{"pattern": "(?=x)", "action": "flag"}]'}), "invalid_regex")
    guardrail.refresh_from_db()
    assert guardrail.content_filters == [{"pattern": "one", "action": "flag", "label": None}]
    assert staff.post(url, {**base, "enforce_zdr": "on", "data_collection": "deny"}).status_code == 302
    guardrail.refresh_from_db()
    assert guardrail.enforce_zdr and guardrail.data_collection == "deny"


def test_inline_assignments_move_keys_and_members_and_refuse_other_accounts(staff, alice, bob_other_account, providers):
    workspace = alice.provisioned.workspace_id
    first = guardrail_create(account_id=alice.account_id, workspace_id=workspace, fields={"name": "first"})
    second = guardrail_create(account_id=alice.account_id, workspace_id=workspace, fields={"name": "second"})
    key = api_key_create(account_id=alice.account_id, name="k").key
    guardrail_keys_assign(guardrail=first, keys=[key])
    member = Member.objects.create(account_id=alice.account_id, user_id="user_a")
    url = f"/admin/guardrails/guardrail/{second.pk}/change/"
    base = form(alice, name="second")
    bobs_key = bob_other_account.provisioned.inference_key.key
    refused(staff.post(url, {**base, **inline("key_assignments", [{"api_key": bobs_key.pk}])}), "another account")
    assert not GuardrailKeyAssignment.objects.filter(api_key=bobs_key).exists()

    moved = staff.post(
        url,
        {
            **base,
            **inline("key_assignments", [{"api_key": key.pk}]),
            **inline("member_assignments", [{"member": member.pk}]),
        },
    )
    assert moved.status_code == 302
    assert GuardrailKeyAssignment.objects.get(api_key=key).guardrail_id == second.pk  # moved from `first`
    row = GuardrailMemberAssignment.objects.get(member=member)
    assert row.guardrail_id == second.pk and row.assigned_by == "admin:staff"

    key_row = GuardrailKeyAssignment.objects.get(api_key=key)
    removed = staff.post(
        url,
        {
            **base,
            **inline(
                "key_assignments", [{"id": key_row.pk, "guardrail": second.pk, "api_key": key.pk, "DELETE": "on"}], 1
            ),
            **inline("member_assignments", [{"id": row.pk, "guardrail": second.pk, "member": member.pk}], 1),
        },
    )
    assert removed.status_code == 302
    assert not GuardrailKeyAssignment.objects.exists()
    assert GuardrailMemberAssignment.objects.get(member=member).guardrail_id == second.pk


def test_list_columns_show_scope_budget_spend_and_reset(staff, alice, providers):
    key = alice.provisioned.inference_key.key
    guardrail = guardrail_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        fields={"name": "budgeted", "limit_usd": Decimal("5"), "reset_interval": "daily", "is_workspace_default": True},
    )
    guardrail_keys_assign(guardrail=guardrail, keys=[key])
    Generation.objects.create(
        id="gen-1", account_id=alice.account_id, api_key_id=key.pk, requested_model="m", cost=Decimal("1.25")
    )
    page = html.unescape(staff.get("/admin/guardrails/guardrail/").content.decode())
    assert "workspace default, 1 key(s)" in page and "$5 daily" in page and "$1.25" in page
    assert staff.get(f"/admin/guardrails/guardrail/{guardrail.pk}/change/").status_code == 200
    assert staff.get(ADD).status_code == 200


def page_text(response) -> str:
    assert response.status_code == 200
    return html.unescape(strip_tags(response.content.decode()))


def test_test_this_text_shows_blocks_redactions_and_flags(staff, alice, providers):
    guardrail = guardrail_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        fields={
            "name": "g",
            "content_filters": [{"pattern": r"ACME-\d+", "action": "redact", "label": "code"}],
            "content_filter_builtins": [{"slug": "email", "action": "block"}],
        },
    )
    url = f"/admin/guardrails/guardrail/{guardrail.pk}/test-text/"
    assert staff.get(url).status_code == 200
    redacted = page_text(staff.post(url, {"text": "ship ACME-42 today"}))
    assert "Allowed with action redact" in redacted and "ship [REDACTED:code] today" in redacted
    blocked_page = staff.post(url, {"text": "mail bob@example.com about ACME-7"})
    blocked = page_text(blocked_page)
    assert "Blocked (403): patterns email." in blocked and "What would reach the provider" not in blocked
    row = "<td>5&ndash;20</td><td>block</td><td>email</td>"  # each region: characters, action, filters
    assert row in blocked_page.content.decode()
    clean = page_text(staff.post(url, {"text": "nothing here"}))
    assert "Nothing matched" in clean
    anonymous = Client()
    assert anonymous.get(url).status_code == 302  # to the admin login


def test_add_with_inline_assignments_and_a_disabled_key_refused(staff, alice, providers):
    live = api_key_create(account_id=alice.account_id, name="live").key
    disabled = api_key_create(account_id=alice.account_id, name="off").key
    disabled.disabled = True
    disabled.save()
    refused(
        staff.post(ADD, form(alice, **inline("key_assignments", [{"api_key": disabled.pk}]))), "This key is disabled"
    )
    assert not Guardrail.objects.exists()
    assert staff.post(ADD, form(alice, **inline("key_assignments", [{"api_key": live.pk}]))).status_code == 302
    assert GuardrailKeyAssignment.objects.get(api_key=live).guardrail.name == "staff-made"


def test_inline_assignments_refuse_keys_and_members_a_workspace_guardrail_cannot_have(staff, alice, providers):
    other = Workspace.objects.create(account_id=alice.account_id, name="other")
    guardrail = guardrail_create(account_id=alice.account_id, workspace_id=other.id, fields={"name": "other-ws"})
    default_ws_key = api_key_create(account_id=alice.account_id, name="k").key
    member = Member.objects.create(account_id=alice.account_id, user_id="user_a")
    url = f"/admin/guardrails/guardrail/{guardrail.pk}/change/"
    base = form(alice, name="other-ws")
    other_key = inline("key_assignments", [{"api_key": default_ws_key.pk}])
    refused(staff.post(url, {**base, **other_key}), "another workspace")
    refused(staff.post(url, {**base, **inline("member_assignments", [{"member": member.pk}])}), "account-level")
    assert not GuardrailKeyAssignment.objects.exists() and not GuardrailMemberAssignment.objects.exists()
    own_key = api_key_create(account_id=alice.account_id, name="own", workspace_id=other.id).key
    assert staff.post(url, {**base, **inline("key_assignments", [{"api_key": own_key.pk}])}).status_code == 302
    assert GuardrailKeyAssignment.objects.get().api_key == own_key
