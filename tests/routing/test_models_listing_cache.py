"""GET /models from the catalog snapshot: rendered once per catalog version (a credential change is a new version),
per account and per the caller's limits (issue 28, item 2: rendering it per request cost tens of ms of CPU)."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from routing.models import Endpoint, Provider
from routing.selectors import models_list
from routing.serializers import model_record
from routing.services import provider_credential_set

STANDIN_CATALOG = str(Path(__file__).parents[2] / "routing" / "catalog" / "standin.yaml")


@pytest.fixture
def catalog(db):
    call_command("load_catalog", stdout=StringIO())
    call_command("load_catalog", STANDIN_CATALOG, stdout=StringIO())


def listing(persona, path: str = "/api/v1/models") -> tuple[dict, int]:
    """The answer, and how many queries read the models table to make it (none when it was already rendered)."""
    with CaptureQueriesContext(connection) as queries:
        response = persona.client().get(path)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json(), sum('"routing_model"' in query["sql"] for query in queries.captured_queries)


def ids(body: dict) -> set[str]:
    return {model["id"] for model in body["data"]}


def flags(body: dict) -> dict[str, bool]:
    return {model["id"]: model["available"] for model in body["data"]}


def without_flag(record: dict) -> dict:
    return {name: value for name, value in record.items() if name != "available"}


def test_the_listing_is_rendered_once_per_catalog_version(catalog, alice):
    # Given a first listing, rendered from the catalog
    first, reads = listing(alice)
    assert reads > 0
    # what was rendered per request, with each entry's `available` flag for this caller
    assert [without_flag(m) for m in first["data"]] == [model_record(model) for model in models_list()]
    assert flags(first)["openai/gpt-4o"] is False and flags(first)["standin/echo"] is False  # no credentials
    assert first["total_count"] == len(first["data"]) >= 10 and first["links"] == {"next": None}

    # Then the next ones read nothing and answer the same
    for _ in range(5):
        assert listing(alice) == (first, 0)

    # When a BYOK key is added (a credential change is a new catalog version), it is rendered again, once
    added = alice.client(management=True).post(
        "/api/v1/byok", {"provider": "openai", "key": "sk-test-1234567890"}, format="json"
    )
    assert added.status_code == 201, added.content
    again, reads = listing(alice)
    assert reads > 0 and [without_flag(m) for m in again["data"]] == [without_flag(m) for m in first["data"]]
    assert flags(again)["openai/gpt-4o"] is True and flags(again)["standin/echo"] is False  # alice's key serves it
    assert listing(alice) == (again, 0)

    # And when the operator sets or removes a provider's credential
    openai = Provider.objects.get(slug="openai")
    provider_credential_set(provider=openai, plaintext="sk-operator-1234567890abcdef")
    assert listing(alice)[1] > 0
    assert listing(alice)[1] == 0
    provider_credential_set(provider=openai, plaintext=None)
    assert listing(alice)[1] > 0

    # And when the catalog changes, the new listing says so
    for endpoint in Endpoint.objects.filter(model_id="openai/gpt-4o"):
        endpoint.enabled = False
        endpoint.save()
    changed, reads = listing(alice)
    assert reads > 0 and ids(changed) == ids(first) - {"openai/gpt-4o"}
    assert listing(alice) == (changed, 0)


def test_each_account_gets_its_own_view_of_the_cached_listing(catalog, alice, bob_other_account):
    bob = bob_other_account
    for provider in Provider.objects.filter(slug__in=["openai", "anthropic"]):  # /models/user: what is served
        provider_credential_set(provider=provider, plaintext="sk-operator-1234567890abcdef")
    # Given bob's guardrail hides OpenAI's models and his account ignores the providers of Claude
    management = bob.client(management=True)
    guardrail = management.post(
        "/api/v1/guardrails", {"name": "No OpenAI", "ignored_models": ["openai/*"]}, format="json"
    )
    assert guardrail.status_code == 201, guardrail.content
    key_hash = bob.provisioned.inference_key.key.hash
    assigned = management.post(
        f"/api/v1/guardrails/{guardrail.json()['data']['id']}/assignments/keys",
        {"key_hashes": [key_hash]},
        format="json",
    )
    assert assigned.status_code == 200, assigned.content
    assert (
        management.patch(
            "/api/v1/routing/settings",
            {"ignored_providers": ["anthropic", "google-vertex", "amazon-bedrock"]},
            format="json",
        ).status_code
        == 200
    )

    # When both list the models, in turns, several times
    for _ in range(3):
        alice_models, _reads = listing(alice)
        bob_models, _reads = listing(bob)
        alice_user, _reads = listing(alice, "/api/v1/models/user")
        bob_user, _reads = listing(bob, "/api/v1/models/user")

        # Then each sees its own, never the other's
        assert "openai/gpt-4o" in ids(alice_models) and "openai/gpt-4o" not in ids(bob_models)
        assert "anthropic/claude-sonnet-4.5" in ids(bob_models)  # /models: only the guardrail applies
        assert "anthropic/claude-sonnet-4.5" in ids(alice_user)
        assert "anthropic/claude-sonnet-4.5" not in ids(bob_user) and "openai/gpt-4o" not in ids(bob_user)
        assert ids(alice_user) == {model for model, available in flags(alice_models).items() if available}

    # And a query string is filtered from the same listing, for the caller too
    assert "openai/gpt-4o" not in ids(bob.client().get("/api/v1/models", {"q": "gpt"}).json())
    assert "openai/gpt-4o" in ids(alice.client().get("/api/v1/models", {"q": "gpt"}).json())


def test_the_rendered_listings_kept_are_bounded_in_bytes(monkeypatch):
    from routing import listing

    monkeypatch.setattr(listing, "RENDERED_MAX_BYTES", 100)
    kept = listing.RenderedListings()
    for account in range(4):
        kept.put(("/api/v1/models", account, ()), b"x" * 40)
    assert len(kept) == 2  # the third did not fit: the two before it were dropped
    kept.put(("/api/v1/models", "big", ()), b"x" * 101)  # larger than the whole bound: not kept
    assert kept.get(("/api/v1/models", "big", ())) is None and len(kept) == 2
