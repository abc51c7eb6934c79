"""Issue 17: staff add a BYOK key in the admin through POST /byok's rules (shape check, filters of the account,
a workspace of the same account) and rotate its material through PATCH /byok's; nothing refused is saved and the
material is never shown."""

import html
import json

import pytest

from byok.crypto import Sealed, unseal
from byok.models import ByokKey
from gateway.accounts.models import ApiKey

SECRET = "sk-proj-console-secret-0123456789"


def add_form(persona, **overrides) -> dict:
    return {
        "account": str(persona.account_id),
        "workspace": str(persona.provisioned.workspace_id),
        "provider": "openai",
        "key": SECRET,
        "name": "staff-added",
        "shared_capacity": "always",
        "allowed_models": "null",
        "allowed_api_key_hashes": "null",
        "allowed_user_ids": "null",
        **overrides,
    }


def material(key: ByokKey) -> str:
    return unseal(Sealed(key_id=key.key_id, blob=bytes(key.sealed)), aad=f"byok:{key.id}")


def refused(response, message: str) -> None:
    assert response.status_code == 200, response.status_code
    page = html.unescape(response.content.decode())
    assert "Please correct the error" in page and message in page, page[page.find("errorlist") :][:1500]


def test_staff_add_a_byok_key_seen_by_the_api_and_never_shown(staff, alice, providers):
    assert staff.get("/admin/byok/byokkey/add/").status_code == 200
    hashes = [ApiKey.objects.get(account_id=alice.account_id, kind="inference").hash]
    # A list is one entry per line (a JSON array works too).
    form = add_form(alice, allowed_models="openai/gpt-4o\r\n\r\n", allowed_api_key_hashes=json.dumps(hashes))
    response = staff.post("/admin/byok/byokkey/add/", form)
    assert response.status_code == 302, (response.context["adminform"].form.errors, response.context["errors"])
    key = ByokKey.objects.get(account_id=alice.account_id)
    assert material(key) == SECRET and key.allowed_models == ["openai/gpt-4o"] and key.allowed_api_key_hashes == hashes
    listed = alice.client(management=True).get("/api/v1/byok").json()["data"]
    assert [(item["id"], item["label"]) for item in listed] == [(str(key.pk), key.label)]
    for page in ("/admin/byok/byokkey/", f"/admin/byok/byokkey/{key.pk}/change/"):
        assert SECRET not in staff.get(page).content.decode()
    change_page = staff.get(f"/admin/byok/byokkey/{key.pk}/change/").content.decode()
    assert f">\n{hashes[0]}</textarea>" in change_page  # shown one per line, not as JSON


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"key": "sk-abc\r\nX-Injected: 1"}, "whitespace"),
        ({"key": " sk-leading-space-key"}, "whitespace"),
        ({"provider": "azure", "key": "not json"}, "key"),
        ({"provider": "nosuch"}, "unknown provider"),
        ({"allowed_models": '["no/such-model"]'}, "unknown model ids"),
        ({"allowed_models": "[]"}, "allowed_models"),
        ({"allowed_models": "openai/gpt-4o\nno/such-model"}, "unknown model ids"),
        ({"allowed_models": "[not json"}, "Enter a valid JSON array"),
        ({"allowed_api_key_hashes": json.dumps(["a" * 64])}, "do not belong to a live API key of this account"),
        ({"allowed_user_ids": '["stranger"]'}, "not members of this account"),
        ({"shared_capacity": "sometimes"}, "Select a valid choice"),
    ],
)
def test_add_refuses_what_post_byok_refuses(staff, alice, providers, overrides, message):
    refused(staff.post("/admin/byok/byokkey/add/", add_form(alice, **overrides)), message)
    assert not ByokKey.objects.exists()


def test_add_refuses_another_accounts_workspace(staff, alice, bob_other_account, providers):
    form = add_form(alice, workspace=str(bob_other_account.provisioned.workspace_id))
    refused(staff.post("/admin/byok/byokkey/add/", form), "not a workspace of this account")
    assert not ByokKey.objects.exists()


def test_staff_rotate_the_material_in_place(staff, alice, providers):
    staff.post("/admin/byok/byokkey/add/", add_form(alice))
    key = ByokKey.objects.get()
    change = {
        "name": key.name,
        "sort_order": "0",
        "shared_capacity": "always",
        "allowed_models": "null",
        "allowed_api_key_hashes": "null",
        "allowed_user_ids": "null",
    }
    refused(staff.post(f"/admin/byok/byokkey/{key.pk}/change/", {**change, "new_key": "sk bad key"}), "whitespace")
    assert material(ByokKey.objects.get()) == SECRET

    rotated = "sk-proj-rotated-material-987654321"
    response = staff.post(f"/admin/byok/byokkey/{key.pk}/change/", {**change, "new_key": rotated})
    assert response.status_code == 302
    after = ByokKey.objects.get()
    assert after.pk == key.pk and material(after) == rotated and after.label != key.label

    staff.post(f"/admin/byok/byokkey/{key.pk}/change/", change)  # no new material: kept
    assert material(ByokKey.objects.get()) == rotated
