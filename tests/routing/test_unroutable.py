"""A model no provider has credentials for (a fresh install): refused with a non-retryable 404 of its own
error_type and `x-should-retry: false`, which the official SDKs obey (one request, counted at the gateway); the
routers rank only what the caller can route to (routing.selection.Routable); the retry advice headers of the one
error handler (gateway/errors.py)."""

import http.client
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import anthropic
import openai
import pytest

from gateway.billing.provisioning import account_provision
from plugins.routers.auto import MSG_NO_MODELS
from routing.errors import PROVIDER_NOT_CONFIGURED
from routing.models import Provider
from routing.services import provider_credential_set
from tests.plugins.test_routers_catalog import provider_slug, routers_catalog
from tests.support import Persona, assert_error_envelope, point

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}


def uncredential(*slugs: str) -> None:
    for provider in Provider.objects.filter(slug__in=slugs) if slugs else Provider.objects.all():
        provider_credential_set(provider=provider, plaintext=None)


class CountingProxy:
    """A loopback HTTP forwarder in front of the live gateway: counts the requests that reach the gateway."""

    def __init__(self, target: str):
        self.paths: list[str] = []
        proxy = self
        upstream = urlsplit(target)

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                proxy.paths.append(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                connection.close()

            do_GET = do_POST = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(live_gateway):
    counting = CountingProxy(live_gateway.url)
    yield counting
    counting.close()


@pytest.fixture
def erin(transactional_db, standin_catalog):
    """A funded account whose data is committed (the gunicorn processes see it); the stand-in catalog without any
    credential, as on a fresh install."""
    uncredential()
    return Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))


@pytest.mark.live
def test_openai_sdk_sends_one_request_for_a_model_without_credentials(proxy, erin):
    client = openai.OpenAI(base_url=f"{proxy.url}/api/v1", api_key=erin.api_key, max_retries=2, timeout=20)
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="standin/echo", messages=[{"role": "user", "content": "Hi"}])
    assert proxy.paths == ["/api/v1/chat/completions"]  # the SDK's two retries were not sent
    assert raised.value.response.headers["x-should-retry"] == "false"
    error = raised.value.body
    assert error["metadata"]["error_type"] == PROVIDER_NOT_CONFIGURED
    assert error["metadata"]["availability"]["retryable"] is False


@pytest.mark.live
def test_anthropic_sdk_sends_one_request_for_a_model_without_credentials(proxy, erin):
    client = anthropic.Anthropic(base_url=f"{proxy.url}/api", api_key=erin.api_key, max_retries=2, timeout=20)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="standin/echo", max_tokens=16, messages=[{"role": "user", "content": "Hi"}])
    assert proxy.paths == ["/api/v1/messages"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_no_credentials_is_a_non_retryable_404(alice, standin_catalog, stream):
    uncredential()
    response = alice.client().post(
        "/api/v1/responses", {"model": "standin/echo", "input": "Hi", "stream": stream}, format="json"
    )
    body = assert_error_envelope(response, 404)
    assert response["x-should-retry"] == "false" and not response.has_header("Retry-After")
    metadata = body["error"]["metadata"]
    assert metadata["error_type"] == PROVIDER_NOT_CONFIGURED
    assert metadata["availability"]["code"] == "no_endpoints"
    assert metadata["availability"]["retryable"] is False
    assert metadata["availability"]["excluded_by"] == ["credentials"]
    assert len(standin_catalog.received) == 0


def test_retry_advice_headers(alice, standin_catalog):
    client = alice.client()
    invalid = client.post("/api/v1/responses", {"model": "standin/echo", "input": 5}, format="json")
    assert invalid.status_code == 400 and invalid["x-should-retry"] == "false"
    unknown = client.post("/api/v1/responses", {"model": "nobody/nothing", "input": "Hi"}, format="json")
    assert unknown.status_code == 404 and unknown["x-should-retry"] == "false"
    # Every endpoint answered 503 (overloaded): a retry can help, after Retry-After.
    for provider in Provider.objects.filter(is_local_standin=True):
        point(standin_catalog, provider.slug, "status=503")
    overloaded = client.post("/api/v1/responses", {"model": "standin/echo", "input": "Hi"}, format="json")
    assert overloaded.status_code == 503, overloaded.content
    assert overloaded["Retry-After"] == "1" and not overloaded.has_header("x-should-retry")


# ---- routers ---------------------------------------------------------------------------------------------------


@pytest.fixture
def catalog(db, standin):
    routers_catalog(standin)
    return standin


def routed(persona, model: str, plugins: list | None = None) -> dict:
    payload = {"model": model, "input": "Write a python function that parses a CSV line", "plugins": plugins or []}
    response = persona.client().post("/api/v1/responses", payload, format="json", **METADATA)
    assert response.status_code == 200, response.content
    return response.json()


def test_auto_router_ranks_only_models_with_credentials(alice, catalog):
    assert routed(alice, "gateway/auto")["model"] == "acme/alpha"  # the cheapest
    uncredential(provider_slug("acme/alpha"))
    body = routed(alice, "gateway/auto")
    assert body["model"] == "acme/beta"
    entry = next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "auto-router")
    assert "acme/alpha" not in str(entry["data"]["candidates"]) and "acme/alpha" not in entry["data"]["fallbacks"]
    # Allowed only models without credentials: nothing to route to (the router's 404), not a 404 per model.
    uncredential(provider_slug("acme/beta"))
    response = alice.client().post(
        "/api/v1/responses",
        {"model": "gateway/auto", "input": "Hi", "plugins": [{"id": "auto-router", "allowed_models": ["acme/*"]}]},
        format="json",
    )
    assert assert_error_envelope(response, 404)["error"]["message"] == MSG_NO_MODELS


def test_pareto_router_ranks_only_models_with_credentials(alice, catalog):
    first = routed(alice, "gateway/pareto-code")["model"]
    uncredential(provider_slug(first))
    body = routed(alice, "gateway/pareto-code")
    entry = next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "pareto-router")
    assert first not in (entry["data"]["chosen"], *entry["data"]["fallbacks"]), entry["data"]
    assert first not in str(entry["data"]["candidates"]) and body["model"] == entry["data"]["chosen"]


# ---- /models -------------------------------------------------------------------------------------------------


def listing(persona, path: str = "/api/v1/models") -> dict[str, bool]:
    response = persona.client().get(path)
    assert response.status_code == 200, response.content
    return {model["id"]: model["available"] for model in response.json()["data"]}


def test_models_lists_the_catalog_and_says_what_the_caller_can_be_served(alice, standin_catalog):
    from io import StringIO

    from django.core.management import call_command

    call_command("load_catalog", stdout=StringIO())  # the shipped catalog: no credential for any of it
    models = listing(alice)
    assert models["standin/echo"] is True and models["openai/gpt-4o"] is False
    assert models["gateway/auto"] is True  # a router: some model is served
    served = listing(alice, "/api/v1/models/user")
    assert set(served) == {model for model, available in models.items() if available} and "openai/gpt-4o" not in served
    assert set(served.values()) == {True}

    # A BYOK key of the caller's serves OpenAI's models: they are available, to this caller only
    added = alice.client(management=True).post(
        "/api/v1/byok", {"provider": "openai", "key": "sk-test-1234567890"}, format="json"
    )
    assert added.status_code == 201, added.content
    assert listing(alice)["openai/gpt-4o"] is True and "openai/gpt-4o" in listing(alice, "/api/v1/models/user")

    # Without any credential nothing is served, routers included, and /models/user is empty
    uncredential()
    Provider.objects.filter(slug="openai").update(status="disabled")  # (its models' only endpoints)
    from routing.snapshot import catalog_changed

    catalog_changed()
    models = listing(alice)
    assert models and models.get("standin/echo") is False and models["gateway/auto"] is False
    assert listing(alice, "/api/v1/models/user") == {}


def test_a_model_entry_says_whether_it_is_served(alice, standin_catalog):
    client = alice.client()
    assert client.get("/api/v1/models/standin/echo").json()["available"] is True
    assert client.get("/api/v1/model/standin/echo").json()["data"]["available"] is True
    uncredential()
    assert client.get("/api/v1/models/standin/echo").json()["available"] is False
