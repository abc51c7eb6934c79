"""Issue 17: the staff console. The request log (filters, search by generation id, a details page with the
attempts, costs, latency, tokens and pipeline figures, read-only, no prompt text), the account page (keys with
usage and limit, workspaces, members, recent ledger entries and requests, balance and reserved) and suspension
(every key of a suspended account answers 403 with the reason, through the keys' cache)."""

import html
from decimal import Decimal

from gateway.accounts.models import Account, ApiKey
from gateway.admin_forms import usd_text
from gateway.billing.models import Generation
from tests.support import assert_error_envelope

PROMPT = "A very private prompt about zebras"


def page_text(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def ask(persona, **fields):
    body = {"model": "standin/echo", "input": PROMPT, **fields}
    response = persona.client().post("/api/v1/responses", body, format="json")
    assert response.status_code == 200, response.content
    return response["X-Generation-Id"]


def test_request_log_lists_filters_searches_and_shows_a_generation(staff, alice, bob_other_account, standin_catalog):
    mine = [ask(alice) for _ in range(2)]
    theirs = ask(bob_other_account)
    generation = Generation.objects.get(pk=mine[0])
    assert generation.tokens_input > 0 and generation.provider_responses

    listing = page_text(staff.get("/admin/billing/generation/"))
    assert all(gen_id in listing for gen_id in [*mine, theirs])
    assert PROMPT not in listing
    assert usd_text(generation.cost) in listing and f"{generation.cost:.12f}" not in listing  # dollars, not 12 places

    by_account = page_text(staff.get(f"/admin/billing/generation/?account__id__exact={alice.account_id}"))
    assert all(gen_id in by_account for gen_id in mine) and theirs not in by_account

    key = ApiKey.objects.get(account_id=bob_other_account.account_id, kind="inference")
    by_key = page_text(staff.get(f"/admin/billing/generation/?api_key__id__exact={key.pk}"))
    assert theirs in by_key and mine[0] not in by_key

    for query in (
        f"model={generation.model}",
        f"provider={generation.provider}",
        "status=completed",
        "is_byok__exact=0",
        f"created_at__year={generation.created_at.year}",
    ):
        filtered = page_text(staff.get(f"/admin/billing/generation/?{query}"))
        assert mine[0] in filtered, query
    assert mine[0] not in page_text(staff.get("/admin/billing/generation/?is_byok__exact=1"))
    assert mine[0] not in page_text(staff.get("/admin/billing/generation/?status=failed"))

    for bad in ("account__id__exact=nope", "api_key__id__exact=abc", "status=%00", "model=%00"):
        assert mine[0] not in page_text(staff.get(f"/admin/billing/generation/?{bad}")), bad  # no match, no 500
    assert staff.get("/admin/billing/generation/?q=gen%00").status_code == 200  # Django's search form drops it
    keys_of_alice = page_text(staff.get(f"/admin/billing/generation/?account__id__exact={alice.account_id}"))
    assert key.label not in keys_of_alice.split('id="changelist-filter"')[1]  # the key filter offers alice's keys

    searched = page_text(staff.get(f"/admin/billing/generation/?q={mine[1]}"))
    assert mine[1] in searched and mine[0] not in searched and theirs not in searched

    details = page_text(staff.get(f"/admin/billing/generation/{generation.pk}/change/"))
    attempt = generation.provider_responses[0]
    for shown in (
        generation.pk,
        attempt["provider_name"],
        str(generation.tokens_input),
        str(generation.tokens_output),
        f"{generation.cost:f}"[:6],
        "attempts (provider_responses)",
        "guardrail flags",
        "plugins",
    ):
        assert shown.lower() in details.lower(), shown
    assert PROMPT not in details
    # Read-only: no save button, and posting changes nothing.
    assert 'name="_save"' not in details
    assert staff.post(f"/admin/billing/generation/{generation.pk}/change/", {"status": "failed"}).status_code == 403
    assert staff.get("/admin/billing/generation/add/").status_code == 403
    assert Generation.objects.get(pk=generation.pk).status == "completed"


def test_account_page_shows_keys_usage_limit_ledger_and_requests(staff, alice, standin_catalog):
    key = ApiKey.objects.get(account_id=alice.account_id, kind="inference")
    key.limit, key.limit_reset = Decimal("3"), "daily"
    key.save()
    gen_id = ask(alice)
    cost = Generation.objects.get(pk=gen_id).cost
    assert 0 < cost < Decimal("0.0001")
    usage = f"${cost.normalize():f}"  # under a cent: to 8 places, so a request's charge is not "$0.0000"

    page = page_text(staff.get(f"/admin/accounts/account/{alice.account_id}/change/"))
    account = Account.objects.get(pk=alice.account_id)
    for shown in (
        key.label,  # the keys inline
        usage,  # its usage
        f"${Decimal(3) - cost:,.4f} left of $3.0000 (daily)",  # its limit
        "Default",  # the workspaces inline
        gen_id,  # recent requests
        "topup",  # recent ledger entries
        "charge",
        f"{account.balance:f}"[:5],
        "Routing settings of this account",
        "Suspension",
    ):
        assert shown in page, shown
    assert PROMPT not in page

    from gateway.billing.models import LedgerEntry

    LedgerEntry.objects.create(
        account_id=alice.account_id, kind="charge", amount=Decimal("-0.5"), api_key=key, is_byok=True
    )
    keys = page_text(staff.get("/admin/accounts/apikey/"))
    assert "usage (USD)" in keys and usage in keys and "left of $3.0000 (daily)" in keys
    assert f"-{usage}" in page  # the charge in the ledger
    assert "BYOK usage (USD)" in keys and "$0.5000" in keys  # apart from the credits usage
    assert "no limit" in keys  # the management key


def test_suspension_refuses_every_key_with_403_and_lifting_it_restores_them(staff, alice, bob_other_account):
    for management in (False, True):
        assert alice.client(management=management).get("/api/v1/key").status_code == 200

    response = staff.post(
        "/admin/accounts/account/",
        {"action": "suspend_accounts", "_selected_action": [str(alice.account_id)]},
    )
    assert response.status_code == 302
    assert Account.objects.get(pk=alice.account_id).suspended
    for management in (False, True):
        body = assert_error_envelope(alice.client(management=management).get("/api/v1/key"), 403)
        assert "suspended" in body["error"]["message"]
    assert bob_other_account.client().get("/api/v1/key").status_code == 200  # other accounts are untouched

    staff.post(
        "/admin/accounts/account/", {"action": "unsuspend_accounts", "_selected_action": [str(alice.account_id)]}
    )
    assert alice.client().get("/api/v1/key").status_code == 200


def test_suspension_from_the_change_form_shows_the_reason(staff, alice):
    account = Account.objects.get(pk=alice.account_id)
    form = {
        "name": account.name,
        "plan": account.plan,
        "suspended": "on",
        "suspended_reason": "unpaid invoice 2026-11",
    }
    for prefix in ("workspaces", "api_keys", "members"):
        form[f"{prefix}-TOTAL_FORMS"] = "0"
        form[f"{prefix}-INITIAL_FORMS"] = "0"
    workspaces = list(account.workspaces.all())
    form["workspaces-TOTAL_FORMS"] = form["workspaces-INITIAL_FORMS"] = str(len(workspaces))
    for index, workspace in enumerate(workspaces):
        form[f"workspaces-{index}-id"] = str(workspace.pk)
        form[f"workspaces-{index}-account"] = str(account.pk)
        form[f"workspaces-{index}-name"] = workspace.name
    keys = list(account.api_keys.all())
    form["api_keys-TOTAL_FORMS"] = form["api_keys-INITIAL_FORMS"] = str(len(keys))
    for index, key in enumerate(keys):
        form[f"api_keys-{index}-id"] = str(key.pk)
        form[f"api_keys-{index}-account"] = str(account.pk)
    # Warm the key cache first: the suspension must reach a cached key too.
    assert alice.client().get("/api/v1/key").status_code == 200
    response = staff.post(f"/admin/accounts/account/{account.pk}/change/", form)
    assert response.status_code == 302, page_text(response)[:3000]
    account.refresh_from_db()
    assert account.suspended and account.suspended_at is not None
    body = assert_error_envelope(alice.client().get("/api/v1/key"), 403)
    assert "unpaid invoice 2026-11" in body["error"]["message"]
