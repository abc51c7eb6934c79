"""Issue 29 item 8: GET /generation returns what the gateway records: the router's decision, the plugins' figures,
the guardrails' flags and the moderation latency, typed in the OpenAPI document."""

import pytest

from gateway.billing.models import Generation
from tests.plugins.test_fusion import fusion_catalog
from tests.plugins.test_fusion import post as fusion_post
from tests.plugins.test_routers import CODING, catalog  # noqa: F401  # the routers' stand-in catalog fixture


def generation(persona, generation_id: str) -> dict:
    response = persona.client().get("/api/v1/generation", {"id": generation_id})
    assert response.status_code == 200, response.content
    return response.json()["data"]


@pytest.mark.parametrize(("model", "strategy"), [("gateway/auto", "auto"), ("gateway/pareto-code", "pareto")])
def test_the_routers_decision_is_on_the_generation(alice, catalog, model, strategy):  # noqa: F811
    response = alice.client().post("/api/v1/responses", {"model": model, "input": CODING}, format="json")
    assert response.status_code == 200, response.content
    generation_id = response["X-Generation-Id"]
    data = generation(alice, generation_id)
    assert data["router"] == Generation.objects.get(pk=generation_id).router
    assert data["router"]["strategy"] == strategy and data["router"]["chosen"] == data["model"]
    assert data["plugins"] is None and data["guardrail_flags"] is None and data["moderation_latency"] is None


FUSION = {
    "strategy": "fusion",
    "plugin": "fusion",
    "panel": [
        {
            "model": "acme/alpha",
            "status": "completed",
            "provider": "standin-chat",
            "tokens": {"input": 12, "output": 9},
            "cost_usd": 0.0001,
            "latency_ms": 20,
        }
    ],
    "analyst": "acme/beta",
    "analysis": "completed",
    "chosen": "acme/beta",
    "cost_usd": 0.0002,
}
# The figures as each plugin records them (the shapes tests/plugins/* assert on the generation record).
PLUGINS = {
    "web": {"num_search_results": 5, "web_search_engine": "searxng"},
    "file-parser": {"files": 1, "pages": 3, "engine": "pdf-text"},
    "moderation": {
        "engine": "llm",
        "model": "acme/mod",
        "provider": "standin-chat",
        "latency_ms": 41,
        "flagged": False,
    },
    "context-compression": {
        "engine": "middle-out",
        "tokenizer": "estimate",
        "messages_removed": 2,
        "messages_truncated": 0,
        "tokens_removed": 900,
        "tokens_before": 5000,
        "tokens_after": 4100,
        "context_length": 4096,
        "by_default": False,
    },
    "response-healing": {"outcome": "healed", "fixes": ["trailing comma"], "schema": "valid"},
    "server-tools": {"calls": {"gateway:datetime": 2}, "rounds": 3, "stopped": "answered"},
}
FLAGS = [{"guardrail_id": "9b7c", "name": "pii", "patterns": ["email"]}]


def test_plugins_figures_guardrail_flags_and_a_fusion_decision_are_on_the_generation(alice):
    Generation.objects.create(
        id="gen-full-record",
        account_id=alice.account_id,
        requested_model="gateway/fusion",
        model="acme/beta",
        router=FUSION,
        plugins=PLUGINS,
        guardrail_flags=FLAGS,
        moderation_latency=41,
    )
    data = generation(alice, "gen-full-record")
    assert data["router"] == FUSION and data["plugins"] == PLUGINS
    assert data["guardrail_flags"] == FLAGS and data["moderation_latency"] == 41


def test_the_openapi_document_types_them(alice):
    schema = alice.client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    record = schema["Generation"]["properties"]
    for name in ("router", "plugins", "guardrail_flags", "moderation_latency"):
        assert name in record
    plugins = schema["GenerationPlugins"]["properties"]
    assert set(plugins) == set(PLUGINS)
    assert schema["WebFigures"]["properties"].keys() == {"num_search_results", "web_search_engine"}
    assert {"strategy", "chosen", "task_type", "tier", "panel"} <= schema["GenerationRouter"]["properties"].keys()


def test_a_record_written_before_a_figure_existed_still_reads(alice):
    older = {
        "context-compression": {
            key: value for key, value in PLUGINS["context-compression"].items() if key != "by_default"
        }
    }
    Generation.objects.create(id="gen-older", account_id=alice.account_id, requested_model="acme/alpha", plugins=older)
    assert generation(alice, "gen-older")["plugins"] == older


def test_a_fusion_runs_decision_is_on_the_generation(alice, db, standin):
    fusion_catalog(standin)
    body = fusion_post(alice).json()
    generation_id = "gen-" + body["id"].removeprefix("resp_")
    data = generation(alice, generation_id)
    assert data["router"] == Generation.objects.get(pk=generation_id).router
    assert data["router"]["strategy"] == "fusion" and len(data["router"]["panel"]) == 3
