"""Shared fixtures (plain helpers are in tests/support.py). Personas: alice (funded account),
bob_other_account (a second, unrelated account)."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from gateway.billing.provisioning import account_provision

# The last three moved to tests/support.py; still importable from here for tests written against the old layout.
from tests.support import STANDIN_KEY, Persona


def pytest_collection_finish(session):
    """PostgreSQL's pool is made once per process from the settings of the moment: one made while the tests were
    collected (by reading `connection.pool` at import time) holds the main database's name, and every test would
    then run on the main database. Refuse to run then."""
    from django.db import connections

    for alias in connections:
        made = getattr(type(connections[alias]), "_connection_pools", {})
        if alias in made:
            pytest.exit(f"the {alias} database pool was made while collecting, before the test database existed", 3)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Health, stickiness and throttle state live in the cache: every test starts without any."""
    from django.core.cache import cache

    from routing.health import stats_forget

    cache.clear()
    stats_forget()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _fresh_versions():
    """API keys and the catalog are cached per process under version counters: every test starts with none
    (the previous test's rows were rolled back, and its cached copies must not be served)."""
    from gateway.versions.counters import versions_reset

    versions_reset()


@pytest.fixture(autouse=True)
def _no_stray_outbound_http(monkeypatch):
    """Any outbound call that is not to loopback fails the test (the stand-in provider lives on loopback)."""
    import socket

    real_connect = socket.socket.connect

    def guarded_connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and not (host.startswith("127.") or host in ("localhost", "::1"))
            and self.family in (socket.AF_INET, socket.AF_INET6)
        ):
            raise AssertionError(f"unexpected outbound connection to {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)


@pytest.fixture
def staff(db) -> Client:
    """A logged-in superuser's client of the Django admin."""
    User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client(raise_request_exception=True)
    client.login(username="staff", password="pw")
    return client


@pytest.fixture
def alice(db) -> Persona:
    return Persona(account_provision(name="alice", plan="payg", credits=Decimal("10")))


@pytest.fixture
def bob_other_account(db) -> Persona:
    return Persona(account_provision(name="bob", plan="enterprise", credits=Decimal("5")))


@pytest.fixture(scope="session")
def standin():
    """The local stand-in provider on a loopback port for the whole run."""
    from routing.standin.server import serve_in_thread

    server = serve_in_thread()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def standin_catalog(db, standin):
    """The stand-in catalog (model standin/echo on three wire formats), pointed at the test stand-in."""
    from io import StringIO
    from pathlib import Path

    from django.core.management import call_command

    from routing.models import Provider
    from routing.services import provider_credential_set

    catalog = Path(__file__).parents[1] / "routing" / "catalog" / "standin.yaml"
    call_command("load_catalog", str(catalog), stdout=StringIO())
    for provider in Provider.objects.filter(is_local_standin=True):
        provider.base_url = f"{standin.url}/v1"
        provider.save()
        provider_credential_set(provider=provider, plaintext=STANDIN_KEY)
    standin.clear()
    return standin


@pytest.fixture(scope="session")
def live_gateway(django_db_setup, django_db_blocker):
    """gunicorn serving the gateway against the test database (use with `transactional_db` data)."""
    from tests.live import LiveGateway

    gateway = LiveGateway()
    yield gateway
    gateway.stop()


@pytest.fixture
def multi(db, standin):
    """Four stand-in providers (tests.support.PROVIDERS) serving multi/model at different prices and policies."""
    from routing.models import Provider
    from routing.services import catalog_load, provider_credential_set
    from tests.support import PROVIDERS

    catalog_load(
        data={
            "providers": [
                {
                    "slug": slug,
                    "name": slug.title(),
                    "adapter": "openai_chat",
                    "base_url": f"{standin.url}/v1",
                    "zdr": zdr,
                    "retains_prompts": retains,
                    "trains_on_prompts": trains,
                    "allow_private_network": True,
                }
                for slug, (_, zdr, retains, trains, *_rest) in PROVIDERS.items()
            ],
            "models": [
                {
                    "id": "multi/model",
                    "name": "Multi",
                    "context_length": 16000,
                    "endpoints": [
                        {
                            "provider": slug,
                            "upstream_model": f"m-{slug}",
                            "pricing": {"prompt": price, "completion": price},
                            "quantization": quant,
                            "supported_parameters": params,
                            "service_tiers": tiers,
                        }
                        for slug, (price, _z, _r, _t, quant, params, tiers) in PROVIDERS.items()
                    ],
                }
            ],
        }
    )
    for provider in Provider.objects.filter(slug__in=PROVIDERS):
        provider_credential_set(provider=provider, plaintext=f"sk-{provider.slug}")
    standin.clear()
    return standin


@pytest.fixture
def providers(db):
    """Catalog providers with each credential kind (OpenAI, Azure, Bedrock, Vertex) and one model."""
    from routing.models import Provider
    from routing.services import catalog_load

    catalog_load(
        data={
            "providers": [
                {
                    "slug": "openai",
                    "name": "OpenAI",
                    "adapter": "openai_responses",
                    "base_url": "https://api.openai.com/v1",
                },
                {
                    "slug": "azure",
                    "name": "Azure",
                    "adapter": "openai_chat",
                    "credential_kind": "azure",
                    "base_url": "https://example.openai.azure.com",
                },
                {
                    "slug": "amazon-bedrock",
                    "name": "Bedrock",
                    "adapter": "anthropic",
                    "credential_kind": "bedrock",
                    "base_url": "https://bedrock-runtime.us-east-1.amazonaws.com",
                },
                {
                    "slug": "google-vertex",
                    "name": "Vertex",
                    "adapter": "anthropic",
                    "credential_kind": "vertex",
                    "base_url": "https://us-central1-aiplatform.googleapis.com",
                },
            ],
            "models": [
                {
                    "id": "openai/gpt-4o",
                    "name": "GPT-4o",
                    "context_length": 128000,
                    "endpoints": [
                        {"provider": "openai", "upstream_model": "gpt-4o", "pricing": {"prompt": 2.5, "completion": 10}}
                    ],
                }
            ],
        }
    )
    return Provider.objects.all()
