"""Plugin-side plans honour the request's parameters as the request's own plan does (routing.selection.unhonoured:
stop sequences, seed, logprobs reach only endpoints that carry them): a fusion panel member or analyst that cannot
honour one is a 400 naming it before any paid call (never a member asked without the seed), and the routers
(auto, pareto) choose only among models with an endpoint that honours them. Through the stand-in
(tests/plugins/test_routers_catalog.py's five models; one's endpoint lists its parameters without `seed`)."""

from routing.models import Endpoint
from routing.snapshot import catalog_changed
from tests.plugins.test_fusion import PANEL, fusion_catalog
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import assert_error_envelope

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
QUESTION = "What is a good name for a cat?"


def chat(persona, model: str, text: str = QUESTION, **fields):
    """A Chat Completions request (the front door that takes seed and stop)."""
    payload = {"model": model, "messages": [{"role": "user", "content": text}], **fields}
    return persona.client().post("/api/v1/chat/completions", payload, format="json", **METADATA)


def fusion_post(persona, **fields):
    plugin = {"id": "fusion", "analysis_models": PANEL, "model": "bolt/delta", "tools": []}
    return chat(persona, "gateway/fusion", plugins=[plugin], **fields)


def without_seed(model_id: str) -> None:
    """The model's only endpoint lists its parameters without seed (as a provider whose API takes none)."""
    Endpoint.objects.filter(model_id=model_id).update(supported_parameters=["temperature", "max_tokens", "stop"])
    catalog_changed()


def model_calls(standin) -> list[dict]:
    return [call for call in standin.received if call["path"].endswith(("/chat/completions", "/messages"))]


def test_a_panel_member_that_cannot_honour_the_seed_is_a_400_before_any_call(alice, db, standin):
    fusion_catalog(standin)
    without_seed("acme/beta")
    standin.clear()
    response = fusion_post(alice, seed=7)
    body = assert_error_envelope(response, 400)
    assert "acme/beta" in body["error"]["message"] and "seed" in body["error"]["message"]
    assert body["error"]["metadata"]["param"] == "seed"
    assert model_calls(standin) == []  # no member was asked (and paid for) without it
    # the same panel without a seed runs
    assert fusion_post(alice).status_code == 200


def test_an_analyst_that_cannot_honour_the_seed_is_a_400_before_the_panel(alice, db, standin):
    fusion_catalog(standin)
    without_seed("bolt/delta")  # the analyst writes the final answer: it must honour the seed
    standin.clear()
    body = assert_error_envelope(fusion_post(alice, seed=7), 400)
    assert "bolt/delta" in body["error"]["message"] and body["error"]["metadata"]["param"] == "seed"
    assert model_calls(standin) == []


def test_every_panel_member_gets_the_seed_and_stop_sequences(alice, db, standin):
    fusion_catalog(standin)
    response = fusion_post(alice, seed=7, stop=["END"])
    assert response.status_code == 200, response.content
    panel = [call["body"] for call in model_calls(standin) if call["body"].get("model") in {"alpha", "beta", "gamma"}]
    assert len(panel) == len(PANEL)
    assert all(body.get("seed") == 7 and body.get("stop") == ["END"] for body in panel)


def test_the_auto_router_chooses_only_models_that_honour_the_seed(alice, db, standin):
    routers_catalog(standin)
    without_seed("acme/alpha")  # the cheapest: the default tradeoff's choice
    coding = "Write a python function that parses a CSV line"
    assert chat(alice, "gateway/auto", coding).json()["model"] == "acme/alpha"
    seeded = chat(alice, "gateway/auto", coding, seed=7)
    assert seeded.status_code == 200, seeded.content
    body = seeded.json()
    assert body["model"] != "acme/alpha"
    entry = next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == "auto-router")
    assert "acme/alpha" not in entry["data"]["candidates"]
    assert model_calls(standin)[-1]["body"]["seed"] == 7


def test_the_pareto_router_chooses_only_models_that_honour_the_seed(alice, db, standin):
    routers_catalog(standin)
    chosen = chat(alice, "gateway/pareto-code", "Fix the bug in my code").json()["model"]
    without_seed(chosen)
    seeded = chat(alice, "gateway/pareto-code", "Fix the bug in my code", seed=7)
    assert seeded.status_code == 200, seeded.content
    entry = next(e for e in seeded.json()["gateway_metadata"]["pipeline"] if e["name"] == "pareto-router")
    assert chosen not in (entry["data"]["chosen"], *entry["data"]["fallbacks"])  # not chosen, then not served
    assert seeded.json()["model"] == entry["data"]["chosen"]


def test_the_plans_params_are_the_requests_as_normalize_names_them():
    from plugins.common.caller import request_params
    from responses_api.normalize import used_parameters
    from routing.canonical import CanonicalRequest

    request = CanonicalRequest(
        model="",
        input=(),
        stop=("END",),
        seed=7,
        logprobs=True,
        top_logprobs=2,
        temperature=0.2,
        text_format={"type": "json_schema", "name": "x", "schema": {}},
        max_output_tokens=10,
    )
    data = {
        "stop": ["END"],
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
        "temperature": 0.2,
        "text": {"format": {"type": "json_schema"}},
        "max_output_tokens": 10,
    }
    assert request_params(request) == used_parameters(data)


def test_the_callers_provider_preferences_reach_the_panel(alice, db, standin):
    """provider.ignore (or zdr, data_collection: deny, only) says where the caller's prompt may go: a fusion panel
    member served only by an ignored provider is not asked (a failed member, named), as the request's own plan."""
    fusion_catalog(standin)
    response = fusion_post(alice, provider={"ignore": ["rt-beta"]})
    assert response.status_code == 200, response.content
    entry = next(e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "fusion")
    beta = next(member for member in entry["data"]["panel"] if member["model"] == "acme/beta")
    assert beta["status"] == "failed" and beta["cost_usd"] == 0
    assert not [call for call in model_calls(standin) if call["body"].get("model") == "beta"]  # never sent there
    alpha = next(member for member in entry["data"]["panel"] if member["model"] == "acme/alpha")
    assert alpha["status"] == "completed"


def test_the_callers_provider_preferences_reach_the_classifier(alice, db, standin, settings):
    routers_catalog(standin, scripts={"acme/beta": "text=math"})
    settings.AUTO_ROUTER_CLASSIFIER_MODEL = "acme/beta"
    response = chat(alice, "gateway/auto", "Solve 3x + 5 = 20", provider={"ignore": ["rt-beta"]})
    assert response.status_code == 200, response.content
    entry = next(e for e in response.json()["gateway_metadata"]["pipeline"] if e["name"] == "auto-router")
    assert entry["data"]["classifier"] == "heuristic" and "unavailable" in entry["data"]["classifier_note"]
    assert not [call for call in model_calls(standin) if call["body"].get("model") == "beta"]
