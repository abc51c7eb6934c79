"""The catalog: the declarative loader, /models, /models/{author}/{slug}/endpoints, /providers, admin edits."""

import os
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from byok.crypto import mask_secret
from routing.models import Endpoint, Model, Provider
from routing.selectors import endpoints_for_model, provider_credentials
from routing.services import CatalogError, catalog_load, provider_credential_set
from tests.support import assert_error_envelope

STANDIN_CATALOG = str(Path(__file__).parents[2] / "routing" / "catalog" / "standin.yaml")


@pytest.fixture
def catalog(db):
    call_command("load_catalog", stdout=StringIO())
    call_command("load_catalog", STANDIN_CATALOG, stdout=StringIO())


def test_default_catalog_loads_idempotently(catalog):
    counts = (Provider.objects.count(), Model.objects.count(), Endpoint.objects.count())
    call_command("load_catalog", stdout=StringIO())
    assert (Provider.objects.count(), Model.objects.count(), Endpoint.objects.count()) == counts
    assert counts[1] >= 10
    llama = endpoints_for_model(model_id="meta-llama/llama-3.3-70b-instruct")
    assert [e.provider_slug for e in llama][0] == "deepinfra"  # cheapest first
    assert Provider.objects.get(slug="standin-chat").is_local_standin


def test_loader_rejects_bad_rows(db):
    with pytest.raises(CatalogError, match="unknown adapter"):
        catalog_load(data={"providers": [{"slug": "x", "name": "X", "adapter": "smoke", "base_url": "http://x"}]})
    with pytest.raises(CatalogError, match="<author>/<slug>"):
        catalog_load(data={"models": [{"id": "noslash", "name": "n", "context_length": 1}]})
    with pytest.raises(CommandError):
        call_command("load_catalog", "/nonexistent.yaml", stdout=StringIO())


def test_models_listing_shape_and_prices(catalog, alice):
    body = alice.client().get("/api/v1/models").json()
    assert body["total_count"] == len(body["data"]) >= 10
    gpt4o = next(model for model in body["data"] if model["id"] == "openai/gpt-4o")
    assert gpt4o["pricing"]["prompt"] == "0.0000025" and gpt4o["pricing"]["completion"] == "0.00001"
    assert gpt4o["pricing"]["input_cache_read"] == "0.00000125"
    assert gpt4o["context_length"] == 128000 and gpt4o["top_provider"]["max_completion_tokens"] == 16384
    assert gpt4o["architecture"]["input_modalities"] == ["text", "image", "file"]
    assert gpt4o["links"]["details"] == "/api/v1/models/openai/gpt-4o/endpoints"
    required = {
        "id",
        "canonical_slug",
        "name",
        "created",
        "pricing",
        "context_length",
        "architecture",
        "top_provider",
        "per_request_limits",
        "supported_parameters",
        "default_parameters",
        "supported_voices",
        "links",
    }
    assert required <= set(gpt4o)


def test_models_filters_and_pagination(catalog, alice):
    client = alice.client(management=True)  # any key may read the catalog
    claude = client.get("/api/v1/models", {"q": "claude"}).json()
    assert claude["total_count"] == 3 and all("claude" in m["id"] for m in claude["data"])
    reasoning = client.get("/api/v1/models", {"supported_parameters": "reasoning,tools"}).json()
    assert reasoning["data"] and all(
        {"reasoning", "tools"} <= set(m["supported_parameters"]) for m in reasoning["data"]
    )
    text_only = client.get("/api/v1/models", {"input_modalities": "image"}).json()["data"]
    assert "meta-llama/llama-3.3-70b-instruct" not in {m["id"] for m in text_only}
    page = client.get("/api/v1/models", {"offset": 2, "limit": 3}).json()
    assert len(page["data"]) == 3 and page["links"]["next"] == "/api/v1/models?offset=5&limit=3"
    assert_error_envelope(client.get("/api/v1/models", {"limit": 0}), 400)
    groq = client.get("/api/v1/models", {"providers": "groq"}).json()["data"]
    assert [m["id"] for m in groq] == ["meta-llama/llama-3.3-70b-instruct"]


def test_model_endpoints_and_providers(catalog, alice):
    client = alice.client()
    body = client.get("/api/v1/models/meta-llama/llama-3.3-70b-instruct/endpoints").json()["data"]
    assert [e["tag"] for e in body["endpoints"]] == ["deepinfra", "groq", "together", "fireworks"]
    assert body["endpoints"][0]["pricing"]["prompt"] == "0.00000023"
    assert body["endpoints"][0]["quantization"] == "fp8"
    assert_error_envelope(client.get("/api/v1/models/nobody/nothing/endpoints"), 404)
    providers = {p["slug"]: p for p in client.get("/api/v1/providers").json()["data"]}
    assert providers["standin-chat"]["is_local_standin"] is True
    assert providers["deepseek"]["trains_on_prompts"] is True


def test_disabled_endpoints_and_providers_disappear(catalog, alice):
    from routing.snapshot import catalog_changed

    Provider.objects.filter(slug__in=["anthropic", "google-vertex", "amazon-bedrock"]).update(status="disabled")
    catalog_changed()  # a bulk update() sends no save signals
    ids = {m["id"] for m in alice.client().get("/api/v1/models").json()["data"]}
    assert "anthropic/claude-sonnet-4.5" not in ids
    assert endpoints_for_model(model_id="anthropic/claude-sonnet-4.5") == []


def test_staff_add_provider_model_and_endpoint_in_admin_routable_without_restart(catalog, alice):
    User.objects.create_superuser("staff", "s@example.com", "pw")
    staff = Client()
    staff.login(username="staff", password="pw")
    # Given a new self-hosted provider added by staff, with its key
    response = staff.post(
        "/admin/routing/provider/add/",
        {
            "slug": "my-vllm",
            "name": "My vLLM",
            "adapter": "openai_chat",
            "credential_kind": "api_key",
            "base_url": "http://10.0.0.5:8000/v1",
            "status": "active",
            "allow_private_network": "on",
            "new_credential": "sk-vllm-secret-value",
            "endpoints-TOTAL_FORMS": "0",
            "endpoints-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    # And a model with one endpoint on it
    response = staff.post(
        "/admin/routing/model/add/",
        {
            "id": "acme/tiny",
            "name": "Acme Tiny",
            "kind": "chat",
            "context_length": 8192,
            "created": 0,
            "input_modalities": '["text"]',
            "output_modalities": '["text"]',
            "supported_parameters": '["tools"]',
            "endpoints-TOTAL_FORMS": "1",
            "endpoints-INITIAL_FORMS": "0",
            "endpoints-0-provider": Provider.objects.get(slug="my-vllm").pk,
            "endpoints-0-upstream_model": "tiny",
            "endpoints-0-price_prompt": "0.1",
            "endpoints-0-price_completion": "0.2",
            "endpoints-0-price_request": "0",
            "endpoints-0-context_length": "8192",
            "endpoints-0-quantization": "bf16",
            "endpoints-0-enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    # Then it is listed and routable at once, and its key is sealed, not stored in plaintext
    assert "acme/tiny" in {m["id"] for m in alice.client().get("/api/v1/models").json()["data"]}
    [endpoint] = endpoints_for_model(model_id="acme/tiny")
    assert endpoint.base_url == "http://10.0.0.5:8000/v1" and endpoint.allow_private_network
    provider = Provider.objects.get(slug="my-vllm")
    assert b"sk-vllm-secret-value" not in bytes(provider.credential_sealed)
    assert provider_credentials(provider_slug="my-vllm").api_key == "sk-vllm-secret-value"
    assert "sk-vllm-secret-value" not in staff.get(f"/admin/routing/provider/{provider.pk}/change/").content.decode()


def test_environment_overrides_base_url_and_credential(catalog, monkeypatch):
    monkeypatch.setenv("GATEWAY_PROVIDER_TOGETHER_BASE_URL", "http://127.0.0.1:9999/v1")
    monkeypatch.setenv("GATEWAY_PROVIDER_TOGETHER_API_KEY", "sk-from-env")
    together = [
        e for e in endpoints_for_model(model_id="meta-llama/llama-3.3-70b-instruct") if e.provider_slug == "together"
    ][0]
    assert together.base_url == "http://127.0.0.1:9999/v1"
    assert provider_credentials(provider_slug="together").api_key == "sk-from-env"
    monkeypatch.delenv("GATEWAY_PROVIDER_TOGETHER_API_KEY")
    monkeypatch.setenv("TOGETHER_API_KEY", "sk-named-env")
    assert provider_credentials(provider_slug="together").api_key == "sk-named-env"
    assert "TOGETHER_API_KEY" in os.environ


def test_operator_credential_can_be_cleared(catalog):
    provider = Provider.objects.get(slug="mistral")
    provider_credential_set(provider=provider, plaintext="sk-m-123456789")
    assert provider.credential_label == mask_secret("sk-m-123456789") == "sk...89"
    provider_credential_set(provider=provider, plaintext=None)
    assert provider_credentials(provider_slug="mistral") is None
    assert Decimal(Endpoint.objects.filter(provider=provider).first().price_prompt) == Decimal("2")
