"""Provider routing against several stand-in providers serving one model at different prices and
behaviours: each preference's effect on the tried order, load balancing, health, stickiness, tiers."""

import random
from collections import Counter
from decimal import Decimal

import pytest

from gateway.billing.models import Generation
from routing import health, ordering
from routing.models import AccountRoutingSettings, Provider
from routing.ordering import order_endpoints
from routing.preferences import Preferences
from routing.selectors import endpoints_for_model
from routing.services import catalog_load, provider_credential_set
from tests.support import PROVIDERS, assert_error_envelope, point


def tried(client, **body) -> list[str]:
    """The providers tried, in order, when every one of them fails."""
    for slug in PROVIDERS:
        point(_server, slug, "status=500")
    response = client.post("/api/v1/responses", {"model": "multi/model", "input": "Hi", **body}, format="json")
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    for slug in PROVIDERS:
        point(_server, slug)
    for endpoint in endpoints_for_model(model_id="multi/model"):  # these failures were staged: forget them
        health.health_reset(endpoint_id=endpoint.id)
    return [attempt["provider_name"] for attempt in generation.provider_responses]


_server = None


@pytest.fixture(autouse=True)
def _remember(multi):
    global _server
    _server = multi
    ordering.RNG.seed(1234)


def test_sort_by_price(alice):
    assert tried(alice.client(), provider={"sort": "price"}) == ["alpha", "beta", "gamma/us", "gamma/eu"]


def test_order_then_the_rest(alice):
    order = tried(alice.client(), provider={"order": ["gamma", "beta"]})
    assert order[:3] == ["gamma/us", "gamma/eu", "beta"] and order[3] == "alpha"


def test_order_without_fallbacks(alice):
    assert tried(alice.client(), provider={"order": ["beta", "gamma/eu"], "allow_fallbacks": False}) == [
        "beta",
        "gamma/eu",
    ]


def test_no_fallbacks_means_only_the_primary(alice):
    assert len(tried(alice.client(), provider={"sort": "price", "allow_fallbacks": False})) == 1


def test_only_and_ignore_with_base_slugs(alice):
    assert tried(alice.client(), provider={"only": ["gamma"], "sort": "price"}) == ["gamma/us", "gamma/eu"]
    assert tried(alice.client(), provider={"ignore": ["gamma", "alpha"]}) == ["beta"]


def test_zdr_and_data_collection(alice):
    assert tried(alice.client(), provider={"zdr": True, "sort": "price"}) == ["alpha", "gamma/us"]
    assert tried(alice.client(), provider={"data_collection": "deny", "sort": "price"}) == ["alpha", "gamma/us"]


def test_quantizations_and_max_price(alice):
    assert tried(alice.client(), provider={"quantizations": ["fp16"], "sort": "price"}) == ["gamma/us", "gamma/eu"]
    assert tried(alice.client(), provider={"max_price": {"prompt": 2.5}, "sort": "price"}) == ["alpha", "beta"]


def test_require_parameters(alice):
    body = {"provider": {"require_parameters": True, "sort": "price"}, "text": {"format": {"type": "json_object"}}}
    assert tried(alice.client(), **body) == ["gamma/us", "gamma/eu"]
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    # Without require_parameters, tool support is a soft preference: beta (no tools) moves last.
    assert tried(alice.client(), tools=tools, provider={"sort": "price"}) == ["alpha", "gamma/us", "gamma/eu", "beta"]


def test_sort_partition_none_mixes_models(alice):
    catalog_load(
        data={
            "models": [
                {
                    "id": "multi/cheap",
                    "name": "Cheap",
                    "context_length": 16000,
                    "endpoints": [
                        {"provider": "beta", "upstream_model": "cheap", "pricing": {"prompt": 0.5, "completion": 0.5}}
                    ],
                }
            ]
        }
    )
    by_model = tried(alice.client(), models=["multi/cheap"], provider={"sort": "price"})
    assert by_model == ["alpha", "beta", "gamma/us", "gamma/eu", "beta"]
    together = tried(alice.client(), models=["multi/cheap"], provider={"sort": {"by": "price", "partition": "none"}})
    assert together[0] == "beta" and len(together) == 5
    assert tried(alice.client(), models=["multi/cheap"], route="sort", provider={"sort": "price"})[0] == "alpha"


def measured(samples: dict) -> None:
    endpoints = {e.provider_slug: e.id for e in endpoints_for_model(model_id="multi/model")}
    for slug, (tps, seconds) in samples.items():
        health.health_record(endpoint_id=endpoints[slug], ok=True, latency_s=seconds, throughput=tps)


def test_sort_by_throughput_and_latency_use_measured_percentiles(alice):
    samples = {"alpha": (10, 2.0), "beta": (80, 0.5), "gamma/us": (40, 0.2)}
    measured(samples)
    assert tried(alice.client(), provider={"sort": "throughput"}) == ["beta", "gamma/us", "alpha", "gamma/eu"]
    measured(samples)
    assert tried(alice.client(), provider={"sort": "latency"}) == ["gamma/us", "beta", "alpha", "gamma/eu"]
    measured(samples)
    assert tried(alice.client(), model="multi/model:nitro") == ["beta", "gamma/us", "alpha", "gamma/eu"]


def test_soft_preferences_deprioritise_but_never_exclude(alice):
    endpoints = {e.provider_slug: e.id for e in endpoints_for_model(model_id="multi/model")}
    health.health_record(endpoint_id=endpoints["alpha"], ok=True, latency_s=3.0, throughput=5)
    order = tried(
        alice.client(), provider={"sort": "price", "preferred_max_latency": 1, "preferred_min_throughput": {"p50": 20}}
    )
    assert order == ["beta", "gamma/us", "gamma/eu", "alpha"]


def update_settings(account_id, **fields) -> None:
    from routing.snapshot import catalog_changed

    AccountRoutingSettings.objects.filter(account_id=account_id).update(**fields)
    catalog_changed()  # a bulk update sends no signals


def test_account_defaults_are_a_ceiling(alice):
    AccountRoutingSettings.objects.create(
        account_id=alice.account_id, allowed_providers=["alpha", "gamma"], ignored_providers=["gamma/eu"]
    )
    assert tried(alice.client(), provider={"sort": "price"}) == ["alpha", "gamma/us"]
    # A request cannot widen the allow-list, not even with a base slug...
    assert tried(alice.client(), provider={"only": ["beta", "alpha"], "sort": "price"}) == ["alpha"]
    update_settings(alice.account_id, allowed_providers=["gamma/us"], ignored_providers=[])
    assert tried(alice.client(), provider={"only": ["gamma"], "sort": "price"}) == ["gamma/us"]
    update_settings(alice.account_id, allowed_providers=["alpha", "gamma"], ignored_providers=["gamma/eu"])
    # ...and account ZDR cannot be switched off by the request.
    update_settings(alice.account_id, allowed_providers=[], enforce_zdr=True)
    assert tried(alice.client(), provider={"zdr": False, "sort": "price"}) == ["alpha", "gamma/us"]


def test_routing_settings_api(alice):
    client = alice.client(management=True)
    response = client.patch(
        "/api/v1/routing/settings", {"data_collection": "deny", "ignored_providers": ["beta"]}, format="json"
    )
    assert response.json()["data"] == {
        "allowed_providers": [],
        "ignored_providers": ["beta"],
        "enforce_zdr": False,
        "data_collection": "deny",
    }
    assert tried(alice.client(), provider={"sort": "price"}) == ["alpha", "gamma/us"]
    body = assert_error_envelope(
        client.patch("/api/v1/routing/settings", {"allowed_providers": ["nope"]}, format="json"), 400
    )
    assert "nope" in body["error"]["message"]
    assert_error_envelope(alice.client().get("/api/v1/routing/settings"), 403)


def test_nothing_left_errors_name_the_constraint(alice):
    body = assert_error_envelope(
        alice.client().post(
            "/api/v1/responses",
            {"model": "multi/model", "input": "Hi", "provider": {"zdr": True, "only": ["beta"]}},
            format="json",
        ),
        404,
    )
    availability = body["error"]["metadata"]["availability"]
    assert availability["code"] == "constraint_filtered"
    assert set(availability["excluded_by"]) == {"allowed_providers", "data_policy:zdr"}
    body = assert_error_envelope(
        alice.client().post(
            "/api/v1/responses",
            {"model": "multi/model", "input": "Hi", "provider": {"zdr": True, "quantizations": ["bf16"]}},
            format="json",
        ),
        404,
    )
    assert "quantization" in body["error"]["message"]
    Provider.objects.filter(slug__in=["alpha", "gamma/us"]).update(status="disabled")
    from routing.snapshot import catalog_changed

    catalog_changed()
    body = assert_error_envelope(
        alice.client().post(
            "/api/v1/responses", {"model": "multi/model", "input": "Hi", "provider": {"zdr": True}}, format="json"
        ),
        404,
    )
    assert body["error"]["metadata"]["availability"]["code"] == "privacy_restricted"


def test_missing_credentials_is_a_non_retryable_404(alice):
    for provider in Provider.objects.filter(slug__in=PROVIDERS):
        provider_credential_set(provider=provider, plaintext=None)
    body = assert_error_envelope(
        alice.client().post("/api/v1/responses", {"model": "multi/model", "input": "Hi"}, format="json"), 404
    )
    assert body["error"]["metadata"]["availability"]["code"] == "no_endpoints"
    assert body["error"]["metadata"]["availability"]["retryable"] is False


def test_health_skips_failing_endpoints_until_they_recover(alice, monkeypatch):
    clock = [1_000_000.0]
    monkeypatch.setattr(health, "now", lambda: clock[0])
    point(_server, "alpha", "status=503")
    client = alice.client()
    body = {"model": "multi/model", "input": "Hi", "provider": {"sort": "price"}}
    # Two failures in a row trip alpha: the next request does not try it first.
    for _ in range(2):
        client.post("/api/v1/responses", body, format="json")
        clock[0] += 1
    response = client.post("/api/v1/responses", body, format="json")
    generation = Generation.objects.get(pk=response["X-Generation-Id"])
    assert [a["provider_name"] for a in generation.provider_responses] == ["beta"]
    # Once the failures age out of the window, alpha is first again.
    point(_server, "alpha")
    clock[0] += health.HEALTH_WINDOW + 1
    response = client.post("/api/v1/responses", body, format="json")
    assert Generation.objects.get(pk=response["X-Generation-Id"]).provider == "alpha"


def test_service_tier_reaches_only_endpoints_that_offer_it(alice):
    client = alice.client()
    for slug, expected in [("alpha", "priority"), ("beta", None)]:
        _server.clear()
        response = client.post(
            "/api/v1/responses",
            {"model": "multi/model", "input": "Hi", "service_tier": "fast", "provider": {"only": [slug]}},
            format="json",
        )
        assert response.status_code == 200
        sent = _server.requests_for("/chat/completions")[-1]["body"]
        assert sent.get("service_tier") == expected
        assert Generation.objects.get(pk=response["X-Generation-Id"]).service_tier == "priority"
    _server.clear()
    client.post("/api/v1/responses", {"model": "multi/model:floor", "input": "Hi"}, format="json")
    first = _server.requests_for("/chat/completions")[0]
    assert first["body"]["model"] == "m-alpha" and first["body"]["service_tier"] == "flex"


def test_sticky_sessions_in_process(alice):
    client = alice.client()
    ordering.RNG.seed(7)
    served = set()
    for _ in range(12):
        response = client.post(
            "/api/v1/responses", {"model": "multi/model", "input": "Hi", "session_id": "conv-1"}, format="json"
        )
        served.add(Generation.objects.get(pk=response["X-Generation-Id"]).provider)
    assert len(served) == 1
    # When the sticky endpoint fails, the session falls back normally and sticks to the new one.
    point(_server, served.pop(), "status=500")
    first = client.post(
        "/api/v1/responses", {"model": "multi/model", "input": "Hi", "session_id": "conv-1"}, format="json"
    )
    assert first.status_code == 200


# ---- load balancing, without HTTP --------------------------------------------------------------------


def test_inverse_square_price_distribution():
    from tests.support import standin_endpoint

    class Server:
        url = "http://127.0.0.1:1"

    prices = {"a": Decimal(1), "b": Decimal(2), "c": Decimal(4)}  # per M prompt; completion equal
    endpoints = [
        standin_endpoint(Server, adapter="openai_chat", id=i, provider_slug=slug, price_prompt=p, price_completion=p)
        for i, (slug, p) in enumerate(prices.items())
    ]
    rng = random.Random(20261125)
    draws = 6000
    firsts = Counter(
        order_endpoints(groups=[endpoints], prefs=Preferences(), used_params=frozenset(), stats={}, rng=rng)
        .endpoints[0]
        .provider_slug
        for _ in range(draws)
    )
    weights = {slug: 1 / float(2 * p) ** 2 for slug, p in prices.items()}
    total = sum(weights.values())
    chi_square = sum((firsts[s] - draws * w / total) ** 2 / (draws * w / total) for s, w in weights.items())
    assert chi_square < 9.21, (firsts, chi_square)  # 2 degrees of freedom, p = 0.01
    # The fallbacks after the first pick follow price.
    order = order_endpoints(
        groups=[endpoints], prefs=Preferences(), used_params=frozenset(), stats={}, rng=random.Random(3)
    ).endpoints
    rest = [e.provider_slug for e in order[1:]]
    assert rest == sorted(rest, key=lambda s: prices[s])
