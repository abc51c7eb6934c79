"""OpenAPI schema and docs, health endpoints, the admin, and production settings."""

import os
import re
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.test import Client

from gateway.accounts.keys import key_hash
from gateway.accounts.models import ApiKey
from gateway.billing.models import LedgerEntry


@pytest.mark.django_db
def test_openapi_schema_is_served_with_one_bearer_scheme():
    schema = Client().get("/api/v1/openapi.json").json()
    assert schema["info"]["version"] == "1.0.0"
    schemes = schema["components"]["securitySchemes"]
    assert set(schemes) == {"ApiKeyAuth"}
    scheme = schemes["ApiKeyAuth"]
    assert {key: scheme[key] for key in ("type", "scheme")} == {"type": "http", "scheme": "bearer"}
    # The description tells a client which header to send and which key kind each side of the API needs.
    assert "Authorization: Bearer sk-gw-v1-" in scheme["description"]
    assert "management key" in scheme["description"] and "inference key" in scheme["description"]
    for path in ["/keys", "/keys/{key_hash}", "/key", "/credits"]:
        assert path in schema["paths"], path
    create = schema["paths"]["/keys"]["post"]
    assert {"201", "400", "401", "403"} <= set(create["responses"])
    error_ref = create["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert error_ref.endswith("/ErrorBody")
    assert Client().get("/api/v1/openapi.yaml").status_code == 200


@pytest.mark.django_db
def test_request_bodies_are_described_for_integrators_not_by_their_base_classes():
    # A serializer without a docstring of its own is described by its base class's: implementation notes
    schemas = Client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    bodies = ["ResponseCreateRequest", "ChatCompletionCreateRequest", "MessageCreateRequest", "EmbeddingCreateRequest"]
    for name in bodies:
        assert "request" in schemas[name]["description"], name
    leaked = [
        name
        for name, schema in schemas.items()
        if re.search(r"deep-cop|field tree|\bGIL\b|\blent\b", schema.get("description", ""))
    ]
    assert leaked == []


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/api/v1/docs", "/api/v1/redoc"])
def test_docs_pages_use_local_assets_only(page):
    html = Client().get(page).content.decode()
    assert "/static/drf_spectacular_sidecar/" in html
    assert not re.search(r"https?://(?!127\.0\.0\.1|localhost)[^\"']*\.(js|css)", html)
    asset = re.search(r'/static/drf_spectacular_sidecar/[^"\']+\.js', html).group(0)
    assert Client().get(asset).status_code == 200


@pytest.mark.django_db
def test_health_endpoints():
    assert Client().get("/healthz").json() == {"status": "ok"}
    ready = Client().get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "cache": "ok"}


@pytest.fixture
def staff_client(db) -> Client:
    User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.login(username="staff", password="pw")
    return client


def test_admin_creates_a_key_and_shows_the_plaintext_once(staff_client, alice):
    workspace = alice.provisioned.workspace_id
    response = staff_client.post(
        "/admin/accounts/apikey/add/",
        {
            "name": "from admin",
            "kind": "inference",
            "account": alice.account_id,
            "workspace": workspace,
            "include_byok_in_limit": "",
            "disabled": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = re.findall(r"sk-gw-v1-inf-[A-Za-z0-9_-]{43}", response.content.decode())
    assert len(set(shown)) == 1
    key = ApiKey.objects.get(name="from admin")
    assert key.hash == key_hash(shown[0])
    change_page = staff_client.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()
    assert shown[0] not in change_page and key.label in change_page


def test_admin_tops_up_credits_through_the_ledger(staff_client, alice):
    response = staff_client.post(
        "/admin/billing/ledgerentry/add/",
        {
            "account": alice.account_id,
            "kind": "topup",
            "amount": "2.5",
            "note": "wire transfer",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = LedgerEntry.objects.get(note="wire transfer")
    assert entry.amount == 2.5 and entry.kind == "topup"
    assert alice.client(management=True).get("/api/v1/credits").json()["data"]["total_credits"] == 12.5


def test_admin_creates_an_account_with_its_default_workspace(staff_client):
    response = staff_client.post(
        "/admin/accounts/account/add/",
        {
            "name": "new co",
            "plan": "payg",
            "workspaces-TOTAL_FORMS": "0",
            "workspaces-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302
    from gateway.accounts.models import Account

    assert Account.objects.get(name="new co").workspaces.filter(is_default=True).count() == 1


def test_check_deploy_passes_with_production_settings():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings.base",
        "DEBUG": "false",
        "SECRET_KEY": "p" * 20 + "Zq8#kX2!vL9@mN4$wR7^tY1&uI5*oP3(aS6)dF0_gH" + "q" * 10,
        "ALLOWED_HOSTS": "gateway.example.com",
        "SECURE_HTTPS": "true",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
